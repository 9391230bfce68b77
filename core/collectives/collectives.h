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
#include "ringlet/types.h"

namespace ringlet::core {

void allreduce(Communicator& comm, const void* send, void* recv, size_t count, DataType dtype,
               ReduceOp op);

// recv_counts[r] elements come from rank r, laid out in rank order in recv.
void allgather(Communicator& comm, const void* send, void* recv,
               std::span<const size_t> recv_counts, DataType dtype);

void broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root);

// The reduction of all ranks' `send` (sum of recv_counts elements) is
// scattered: rank r receives recv_counts[r] elements, in rank order.
void reducescatter(Communicator& comm, const void* send, void* recv,
                   std::span<const size_t> recv_counts, DataType dtype, ReduceOp op);

// send_counts[r] elements go to rank r, recv_counts[r] come from rank r, both
// laid out in rank order.
void alltoall(Communicator& comm, const void* send, std::span<const size_t> send_counts,
              void* recv, std::span<const size_t> recv_counts, DataType dtype);

void barrier(Communicator& comm);

}  // namespace ringlet::core
