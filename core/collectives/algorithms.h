// The algorithms behind the collectives, one per file. Callers (collectives.cc)
// have already handled size 1, count 0 and the choice of algorithm; these
// functions assume size > 1 and that every rank calls with the same arguments.
#pragma once

#include <cstddef>
#include <span>

#include "core/collectives/segments.h"
#include "core/collectives/workspace.h"
#include "core/communicator.h"
#include "ringlet/types.h"

namespace ringlet::core::collectives {

// Ring, over pairs (any carrier).
// Reduces every rank's `send` (sum of counts elements) and leaves block r of the
// result, counts[r] elements, in `own_out` on rank r (finished for kAvg).
void ring_reducescatter(Communicator& comm, const void* send, void* own_out,
                        std::span<const size_t> counts, DataType dtype, ReduceOp op);
// Block r (counts[r] elements) comes from rank r's `send`; `send` may be recv's own block.
void ring_allgather(Communicator& comm, const void* send, void* recv,
                    std::span<const size_t> counts, DataType dtype);
// Its phases concern tensors [first, end) of the caller (see PhaseObserver).
void ring_allreduce(Communicator& comm, const void* send, void* recv, size_t count, DataType dtype,
                    ReduceOp op, size_t first = 0, size_t end = PhaseObserver::kAllTensors);
// Several tensors through the fusion buffer, piece by piece (one tensor: in
// its own memory). Results: postscale * op(prescale * inputs).
void ring_allreduce_segments(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                             double postscale);
void ring_broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root);
void pairwise_alltoall(Communicator& comm, const void* send, std::span<const size_t> send_counts,
                       void* recv, std::span<const size_t> recv_counts, DataType dtype);
void ring_barrier(Communicator& comm);

// Direct, through the shared-memory window (one host).
// Allreduce of one or several tensors (Segments: one message), staged
// straight from and gathered straight into the tensors, with the scales
// applied on those copies: postscale * op(prescale * inputs).
void direct_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                      double postscale);
void onestep_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                       double postscale);
void direct_allgather(Communicator& comm, const void* send, void* recv,
                      std::span<const size_t> counts, DataType dtype);
void direct_reducescatter(Communicator& comm, const void* send, void* recv,
                          std::span<const size_t> counts, DataType dtype, ReduceOp op);
void direct_broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root);
void direct_alltoall(Communicator& comm, const void* send, std::span<const size_t> send_counts,
                     void* recv, std::span<const size_t> recv_counts, DataType dtype);
void window_barrier(Communicator& comm);

}  // namespace ringlet::core::collectives
