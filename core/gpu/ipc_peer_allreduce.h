// The device allreduces whose kernels wait on each other through flags in
// their peers' memory (kernels::cuda::peer_allreduce,
// ringlet/kernels/peer_protocol.h), between the ranks of one host on the
// CUDA IPC window: one-shot or two-shot through the window's halves, and
// two-shot between the ranks' own buffers. The host only queues: it packs,
// launches one kernel per round and unpacks, and tells its peers through the
// host window what the host must know (a half is free, where a tensor lies);
// the device never waits for an interprocess event. CUDA builds only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/gpu/cuda_ipc_tensors.h"
#include "core/gpu/cuda_ipc_window.h"
#include "core/gpu/device_collectives.h"
#include "core/gpu/device_queue.h"
#include "core/gpu/ipc_rounds.h"
#include "ringlet/transport/transport.h"
#include "ringlet/types.h"

namespace ringlet::core::gpu {

// One allreduce on the window, as one rank queues it.
struct PeerAllreduce {
  Rounds& rounds;
  CudaIpcWindow& window;
  DeviceQueue& q;
  DataType dtype;
  ReduceOp op;
  double prescale;
  double postscale;
  transport::Deadline deadline;
  // Whether the window's last device round ended with every peer done with
  // this rank's memory (Rounds::begin); these algorithms leave it true.
  bool& peers_done;
};

// The fused `tensors` through the halves, a round at a time: pack (with the
// prescale) into this rank's half, one kernel (one-shot: into the second
// half of this rank's half, or straight into a lone tensor's output;
// two-shot: into every rank's half), unpack. Every rank passes the same
// `two_shot`.
void peer_window_allreduce(const PeerAllreduce& a, std::span<const DeviceSegment> tensors,
                           bool two_shot);

// `t` two-shot between the ranks' own buffers, in one round: the ranks tell
// each other where their tensors lie, open the peers' allocations, and each
// folds its part of every input into every output. Returns false, having
// queued nothing, when some rank cannot share its tensors (every rank then
// learns it alike).
bool peer_direct_allreduce(const PeerAllreduce& a, PeerTensors& peers, const DeviceSegment& t);

// Throws the failure a waiting kernel of `window` reported, if any: a
// timeout naming the peer (its global rank, `globals[local rank]`) whose
// flag never came, the round and the step.
void throw_if_a_kernel_gave_up(const CudaIpcWindow& window, const std::vector<int>& globals,
                               int rank);

}  // namespace ringlet::core::gpu
