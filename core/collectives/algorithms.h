// The algorithms behind the collectives, one per file, and one dispatch table
// per collective (algorithm -> function). Callers (collectives.cc) have
// already handled size 1, count 0 and the choice of algorithm; these functions
// assume size > 1 and that every rank calls with the same arguments.
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "core/collectives/algorithm_table.h"
#include "core/collectives/segments.h"
#include "core/collectives/workspace.h"
#include "core/communicator.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/types.h"

namespace ringlet::core::collectives {

// The reductions' results are scaled once, by their owner, by
// kernels::ops::result_scale(op, postscale, size): the postscale, with an
// average's 1/size joined to it (no scaling where that is 1.0).
//
// Ring, over pairs (any carrier).
// Reduces every rank's `send` (sum of counts elements) and leaves block r of the
// result, counts[r] elements, scaled, in `own_out` on rank r.
void ring_reducescatter(Communicator& comm, const void* send, void* own_out,
                        std::span<const size_t> counts, DataType dtype, ReduceOp op,
                        double postscale);
// Block r (counts[r] elements) comes from rank r's `send`; `send` may be recv's own block.
void ring_allgather(Communicator& comm, const void* send, void* recv,
                    std::span<const size_t> counts, DataType dtype);
// Its phases concern tensors [first, end) of the caller (see PhaseObserver).
void ring_allreduce(Communicator& comm, const void* send, void* recv, size_t count, DataType dtype,
                    ReduceOp op, double postscale, size_t first = 0,
                    size_t end = PhaseObserver::kAllTensors);
// Several tensors through the fusion buffer, piece by piece (one tensor: in
// its own memory). Each input is scaled by prescale as it is packed; the
// result's one factor is applied by ring_reducescatter (above), so the unpack
// is a copy.
void ring_allreduce_segments(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                             double postscale);
void ring_broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root);
void pairwise_alltoall(Communicator& comm, const void* send, std::span<const size_t> send_counts,
                       void* recv, std::span<const size_t> recv_counts, DataType dtype);
void ring_barrier(Communicator& comm);

// Direct, through the shared-memory window (one host).
// Allreduce of one or several tensors (Segments: one message), staged
// straight from the tensors (scaled by prescale on that copy) and gathered
// straight into them: each part's owner scales it by the result's one factor
// once it has reduced it, so the gather is a copy.
void direct_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                      double postscale);
void onestep_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                       double postscale);
void direct_allgather(Communicator& comm, const void* send, void* recv,
                      std::span<const size_t> counts, DataType dtype);
void direct_reducescatter(Communicator& comm, const void* send, void* recv,
                          std::span<const size_t> counts, DataType dtype, ReduceOp op,
                          double postscale);
void direct_broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root);
void direct_alltoall(Communicator& comm, const void* send, std::span<const size_t> send_counts,
                     void* recv, std::span<const size_t> recv_counts, DataType dtype);
void window_barrier(Communicator& comm);

// Hierarchical, across hosts: within each host through its window, across
// hosts over pairs (Communicator::host_groups()). The allreduce needs as many
// ranks on every host; the allgather takes any.
void hierarchical_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                            double postscale);
void hierarchical_allgather(Communicator& comm, const void* send, void* recv,
                            std::span<const size_t> counts, DataType dtype);

// MPI's own collectives on the communicator's MPI communicator
// (HOROVOD_CPU_OPERATIONS=MPI; mpi_communicator.h), with Ringlet's scaling
// around them. Builds without MPI have stand-ins that refuse.
void mpi_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                   double postscale);
void mpi_allgather(Communicator& comm, const void* send, void* recv, std::span<const size_t> counts,
                   DataType dtype);
void mpi_broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root);
void mpi_reducescatter(Communicator& comm, const void* send, void* recv,
                       std::span<const size_t> counts, DataType dtype, ReduceOp op,
                       double postscale);
void mpi_alltoall(Communicator& comm, const void* send, std::span<const size_t> send_counts,
                  void* recv, std::span<const size_t> recv_counts, DataType dtype);
void mpi_barrier(Communicator& comm);

// The dispatch tables: every algorithm that a row of the algorithm table can
// pick for a collective has its entry here (the algorithm table's unit test
// checks this).
template <class Fn>
struct Implementation {
  Algorithm algorithm;
  Fn run;
};

using AllreduceFn = void (*)(Communicator&, const Segments&, ReduceOp, double prescale,
                             double postscale);
using AllgatherFn = void (*)(Communicator&, const void* send, void* recv,
                             std::span<const size_t> counts, DataType);
using BroadcastFn = void (*)(Communicator&, void* buffer, size_t count, DataType, int root);
using ReducescatterFn = void (*)(Communicator&, const void* send, void* recv,
                                 std::span<const size_t> counts, DataType, ReduceOp,
                                 double postscale);
using AlltoallFn = void (*)(Communicator&, const void* send, std::span<const size_t> send_counts,
                            void* recv, std::span<const size_t> recv_counts, DataType);
using BarrierFn = void (*)(Communicator&);

inline constexpr std::array<Implementation<AllreduceFn>, 5> kAllreduceImpls = {{
    {Algorithm::kRing, &ring_allreduce_segments},
    {Algorithm::kDirect, &direct_allreduce},
    {Algorithm::kOneStep, &onestep_allreduce},
    {Algorithm::kHierarchical, &hierarchical_allreduce},
    {Algorithm::kMpi, &mpi_allreduce},
}};
inline constexpr std::array<Implementation<AllgatherFn>, 4> kAllgatherImpls = {{
    {Algorithm::kRing, &ring_allgather},
    {Algorithm::kDirect, &direct_allgather},
    {Algorithm::kHierarchical, &hierarchical_allgather},
    {Algorithm::kMpi, &mpi_allgather},
}};
inline constexpr std::array<Implementation<BroadcastFn>, 3> kBroadcastImpls = {{
    {Algorithm::kRing, &ring_broadcast},
    {Algorithm::kDirect, &direct_broadcast},
    {Algorithm::kMpi, &mpi_broadcast},
}};
inline constexpr std::array<Implementation<ReducescatterFn>, 3> kReducescatterImpls = {{
    {Algorithm::kRing, &ring_reducescatter},
    {Algorithm::kDirect, &direct_reducescatter},
    {Algorithm::kMpi, &mpi_reducescatter},
}};
inline constexpr std::array<Implementation<AlltoallFn>, 3> kAlltoallImpls = {{
    {Algorithm::kRing, &pairwise_alltoall},
    {Algorithm::kDirect, &direct_alltoall},
    {Algorithm::kMpi, &mpi_alltoall},
}};
inline constexpr std::array<Implementation<BarrierFn>, 3> kBarrierImpls = {{
    {Algorithm::kRing, &ring_barrier},
    {Algorithm::kDirect, &window_barrier},
    {Algorithm::kMpi, &mpi_barrier},
}};

// The function behind `a`; null when the collective has no such algorithm.
template <class Fn, size_t N>
constexpr Fn implementation(const std::array<Implementation<Fn>, N>& table, Algorithm a) {
  for (const Implementation<Fn>& i : table) {
    if (i.algorithm == a) return i.run;
  }
  return nullptr;
}

// Whether `c` has an implementation of `a` (for tests of the table).
constexpr bool implemented(Collective c, Algorithm a) {
  switch (c) {
    case Collective::kAllreduce:
      return implementation(kAllreduceImpls, a) != nullptr;
    case Collective::kAllgather:
      return implementation(kAllgatherImpls, a) != nullptr;
    case Collective::kBroadcast:
      return implementation(kBroadcastImpls, a) != nullptr;
    case Collective::kReducescatter:
      return implementation(kReducescatterImpls, a) != nullptr;
    case Collective::kAlltoall:
      return implementation(kAlltoallImpls, a) != nullptr;
    case Collective::kBarrier:
      return implementation(kBarrierImpls, a) != nullptr;
  }
  return false;
}

// An out-of-place collective on one rank, or its own block: the input copied
// to the output unless they are one buffer.
inline void copy_if_apart(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) kernels::cpu::copy(dst, src, bytes);
}

}  // namespace ringlet::core::collectives
