// Ring allreduce = ring reduce-scatter, then ring allgather, on blocks of
// count/n elements (the first count%n ranks take one more; with count < n some
// blocks are empty and take no posts). The reduce-scatter leaves this rank's
// finished block (scaled already by the result's one factor, the postscale
// with an average's 1/n, so the scaling runs on 1/n of the data, once per
// element, and every rank receives the same bits) in its place in `recv`; the
// allgather then circulates the blocks in place. 2(n-1)/n of the message
// crosses each link, the minimum for a ring. Sub-chunk size and posts in
// flight: see ring_reducescatter.cc. Reported as two phases,
// RING_REDUCESCATTER and RING_ALLGATHER.
#include <vector>

#include "core/collectives/algorithms.h"
#include "core/collectives/workspace.h"
#include "ringlet/common/even_split.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::collectives {

void ring_allreduce(Communicator& comm, const void* send, void* recv, size_t count, DataType dtype,
                    ReduceOp op, double postscale, size_t first, size_t end) {
  const int n = comm.size();
  std::vector<size_t> counts(n);
  size_t offset_me = 0;
  for (int r = 0; r < n; ++r) {
    counts[r] = common::even_share(count, n, r);
    if (r < comm.rank()) offset_me += counts[r];
  }
  auto* own = static_cast<std::byte*>(recv) + offset_me * dtype_size(dtype);
  PhaseScope phase(comm.workspace(), "RING_REDUCESCATTER", first, end);
  ring_reducescatter(comm, send, own, counts, dtype, op, postscale);
  phase.next("RING_ALLGATHER");
  ring_allgather(comm, own, recv, counts, dtype);
}

}  // namespace ringlet::core::collectives
