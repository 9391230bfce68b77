// Direct reduce-scatter through the shared-memory window (one host), per-rank
// counts. Each round takes up to a round (window_layout.h) of the whole vector: every
// rank copies that range of its input into its staging half slice by slice,
// publishing staged = (g, k+1); then rank i, for each slice that meets its own
// block, waits for that slice from every peer and reduce_many's all staging
// copies (local rank order, so the result does not depend on who computes it)
// straight into its output, and scales it there by the result's one factor
// (the postscale, with an average's 1/n) while the slice is in the cache; the
// output is streamed only when nothing follows the reduction. Each input byte
// is staged once and read once by its owner. Slices of
// direct_slice_bytes so that owners start reducing while others still stage.
// In place (recv inside send) is safe: a round writes only output positions at
// or below input positions it has already staged.
#include <algorithm>
#include <vector>

#include "core/collectives/algorithms.h"
#include "core/collectives/window_layout.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::collectives {

void direct_reducescatter(Communicator& comm, const void* send, void* recv,
                          std::span<const size_t> counts, DataType dtype, ReduceOp op,
                          double postscale) {
  namespace cpu = kernels::cpu;
  WindowView v(comm);
  Workspace& ws = comm.workspace();
  const int n = v.size();
  const int me = v.me();
  const size_t es = dtype_size(dtype);
  const size_t re = v.round_elems(es);
  const size_t slice = std::max<size_t>(1, ws.tuning.direct_slice_bytes / es);
  size_t total = 0, mine_lo = 0;
  for (int r = 0; r < n; ++r) {
    if (r == me) mine_lo = total;
    total += counts[r];
  }
  const size_t mine_hi = mine_lo + counts[me];
  const double factor = kernels::ops::result_scale(op, postscale, comm.size());
  const cpu::Store store = factor == 1.0 ? v.store_for(total * es) : cpu::Store::kNormal;
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  ws.inputs.resize(n);

  for (size_t lo = 0; lo < total; lo += re) {
    const size_t hi = std::min(total, lo + re);
    const uint64_t g = ws.next_round();
    v.wait_half_free(g);
    std::byte* staging = v.staging(me, g);
    for (size_t k = 0; lo + k * slice < hi; ++k) {
      const size_t s0 = lo + k * slice, s1 = std::min(hi, s0 + slice);
      cpu::copy(staging + (s0 - lo) * es, in + s0 * es, (s1 - s0) * es);
      v.publish(v.control(me).staged, flag_value(g, k + 1));
    }
    for (size_t k = 0; lo + k * slice < hi; ++k) {
      const size_t x0 = std::max(lo + k * slice, mine_lo);
      const size_t x1 = std::min({hi, lo + (k + 1) * slice, mine_hi});
      if (x0 >= x1) continue;
      for (int j = 0; j < n; ++j) {
        if (j != me) v.wait_at_least(j, &SegmentControl::staged, flag_value(g, k + 1));
        ws.inputs[j] = v.staging(j, g) + (x0 - lo) * es;
      }
      std::byte* dst = out + (x0 - mine_lo) * es;
      cpu::reduce_many(dtype, op, dst, ws.inputs, x1 - x0, store);
      cpu::scale(dtype, dst, x1 - x0, factor);
    }
    v.finish_round(g);
  }
}

}  // namespace ringlet::core::collectives
