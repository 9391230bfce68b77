// Ringlet's own device algorithms over the CUDA IPC window whose steps the
// host orders: after each step a rank records its interprocess event and
// raises the step's flag in the host's window, and a rank that sees a peer's
// flag makes its stream wait for that peer's event (Rounds::publish, wait).
// One per file, as core/collectives is; the class that chooses among them is
// core/gpu/ipc_device_collectives.cc, and the algorithms whose kernels order
// themselves are core/gpu/ipc_peer_allreduce.h. Each runs its rounds on the
// window of `rounds` and, where it ran any, ends with Rounds::drain, so that
// its end on this rank's stream means every peer is done with this rank's
// halves. CUDA builds only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/gpu/cuda_ipc_tensors.h"
#include "core/gpu/device_collectives.h"
#include "core/gpu/device_queue.h"
#include "core/gpu/ipc_rounds.h"
#include "ringlet/types.h"

namespace ringlet::core::gpu {

// Allreduce of `t` between the ranks' own buffers in one round: rank i
// reduces part i of every input into every output (ipc_direct_allreduce.cc).
// Returns false, having queued nothing, when some rank cannot share its
// tensors; the caller then stages them through the window. Sets `last` to
// its round, for the caller's drain.
bool direct_allreduce(Rounds& rounds, PeerTensors& peers, DeviceQueue& q, const DeviceSegment& t,
                      DataType dtype, ReduceOp op, double prescale, double postscale,
                      uint64_t& last);

// The fused `tensors` through the window, a round of up to a half at a time:
// pack, rank i reduces part i of every half in place, unpack
// (ipc_window_allreduce.cc). Sets `last` to its last round.
void window_allreduce(Rounds& rounds, DeviceQueue& q, std::span<const DeviceSegment> tensors,
                      DataType dtype, ReduceOp op, double prescale, double postscale,
                      uint64_t& last);

// The fused `tensors` as a ring over the window, a round of up to a half at
// a time: pack into this rank's half, run ring_steps() against the
// predecessor's half (the reduced flag counts the steps), unpack the whole
// round from this rank's half (ipc_ring_allreduce.cc). Sets `last`.
void ring_allreduce(Rounds& rounds, DeviceQueue& q, std::span<const DeviceSegment> tensors,
                    DataType dtype, ReduceOp op, double prescale, double postscale, uint64_t& last);

// `bytes` of `buffer` from local rank `root_lr`: the root copies each round
// into its half, the others copy it from there (ipc_broadcast.cc).
void window_broadcast(Rounds& rounds, DeviceQueue& q, void* buffer, size_t bytes, int root_lr);

// Every rank's block (counts by communicator rank, elements of `es` bytes)
// into `output` in rank order, this rank's own block excepted (the caller
// copies it): each rank stages its block a round at a time in its half, the
// others copy it from there into place (ipc_allgather.cc).
void window_allgather(Rounds& rounds, DeviceQueue& q, const void* input,
                      std::span<const size_t> counts, void* output, size_t es);

// Each round packs a chunk of every rank's block (slot lr of the half holds
// local rank lr's), with the prescale; rank r then reduces its slot across
// every half straight into its output, and applies the result's one scale
// there (ipc_reducescatter.cc).
void window_reducescatter(Rounds& rounds, DeviceQueue& q, const void* input,
                          std::span<const size_t> counts, void* output, DataType dtype, ReduceOp op,
                          double prescale, double postscale);

// Each round stages a chunk of every block this rank sends (slot lr of the
// half for local rank lr); every rank copies its slot from each peer's half
// (ipc_alltoall.cc). This rank's own rows are the caller's to copy.
void window_alltoall(Rounds& rounds, DeviceQueue& q, const void* input,
                     std::span<const size_t> send_counts, void* output,
                     std::span<const size_t> recv_counts, size_t largest, size_t es);

}  // namespace ringlet::core::gpu
