// The collectives, on host memory, as the runtime and the API call them.
// Counts are in elements (size_t: more than 2^31 is fine). `send` may equal
// `recv` (in place): for allgather, in place means send == recv + offset of
// this rank's block. Each call picks an algorithm from the algorithm table.
// Every rank must call with the same dtype, op, root and counts; on any
// transport failure all ranks throw an error naming the peer.
#pragma once

#include <cstddef>
#include <span>

#include "core/communicator.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/types.h"

namespace ringlet::core {

void allreduce(Communicator& comm, const void* send, void* recv, size_t count, DataType dtype,
               ReduceOp op);

// Several tensors reduced as one message (a fused allreduce): on return
// outputs[i] = scale(f, op over ranks of scale(prescale, inputs[i])) with
// f = kernels::ops::result_scale(op, postscale, size) (kAvg: a sum, and f is
// postscale / size), each scale applied once, where its factor is not 1.0,
// with the kernels' rounding (integers toward zero). outputs[i].count must
// equal inputs[i].count; tensors may be empty; outputs[i] may be inputs[i]
// (in place) but must not otherwise overlap any tensor. Every rank passes the
// same counts in the same order. On one host the window algorithms read the
// tensors and write the results in place of a fusion buffer; the ring packs
// them into one. Reports its phases to comm.workspace().phases when set.
void allreduce_segments(Communicator& comm, std::span<const kernels::cpu::ConstSegment> inputs,
                        std::span<const kernels::cpu::Segment> outputs, DataType dtype, ReduceOp op,
                        double prescale = 1.0, double postscale = 1.0);

// recv_counts[r] elements come from rank r, laid out in rank order in recv.
void allgather(Communicator& comm, const void* send, void* recv,
               std::span<const size_t> recv_counts, DataType dtype);

void broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root);

// The reduction of all ranks' `send` (sum of recv_counts elements) is
// scattered: rank r receives recv_counts[r] elements, in rank order, scaled
// once by kernels::ops::result_scale(op, postscale, size) (kAvg: postscale /
// size), as allreduce_segments scales its results.
void reducescatter(Communicator& comm, const void* send, void* recv,
                   std::span<const size_t> recv_counts, DataType dtype, ReduceOp op,
                   double postscale = 1.0);

// send_counts[r] elements go to rank r, recv_counts[r] come from rank r, both
// laid out in rank order.
void alltoall(Communicator& comm, const void* send, std::span<const size_t> send_counts, void* recv,
              std::span<const size_t> recv_counts, DataType dtype);

void barrier(Communicator& comm);

}  // namespace ringlet::core
