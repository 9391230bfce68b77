// Direct allreduce through the shared-memory window (one host, large messages).
//
// Each round takes up to direct_round_bytes (1 MiB; at most half a staging
// area) of the message and cuts it into n parts, part i owned
// by local rank i, each part into slices of direct_slice_bytes.
//   (a) stage: every rank copies its input into its own staging half, slice k
//       of every part at a time, then publishes staged = (g, k+1).
//   (b) reduce: rank i, for each slice k of part i, waits until every peer has
//       staged slice k, then reduce_many's all ranks' staging copies of it, in
//       local rank order, into its own staging copy (in place: only rank i ever
//       reads part i of a peer's staging, and the reduction reads each element
//       of every input before writing it), divides for kAvg, and publishes
//       reduced = (g, k+1).
//   (c) gather: every rank copies every part's slice k from its owner's staging
//       into its output as the owner's reduced flag shows it, starting with the
//       next rank's part so that owners are not all read at once.
//   (d) publish consumed = g.
// The three phases run as a pipeline over the slices (step t stages slice t,
// reduces t-1, gathers t-2), so each slice is still in the cache when it is
// reduced and read back. The half is staged again at round g+2, after
//       every peer consumed round g: nearly always already true.
// Every result element comes from one reduction in one fixed order, so all
// ranks hold bit-identical results. Per rank and byte: one staging write, a
// 1/n share of the reduction, one read of the result: no ring forwarding.
//
// Slices of 256 KiB: a flag and a doorbell per slice cost well under a
// microsecond, against ~20 us of copying per slice; smaller slices let (b)
// start sooner behind (a). Rounds of 1 MiB keep the staging halves in use
// (2 x n MiB) inside the last-level cache, so staging, reduction and gather
// hit the cache; measured at np=2: 64 MiB in 8.7 ms with 1 MiB rounds against
// ~38 ms with 8 MiB rounds. The output is streamed (non-temporal) once the
// message is past half the LLC: it will not stay in the cache anyway, and
// streaming saves the read-for-ownership (11.2 -> 8.7 ms at 64 MiB; at 4 MiB
// ordinary stores win, 0.29 against 0.40 ms).
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/collectives/window_layout.h"

namespace ringlet::core::collectives {

void direct_allreduce(Communicator& comm, const void* send, void* recv, size_t count,
                      DataType dtype, ReduceOp op) {
  namespace cpu = kernels::cpu;
  WindowView v(comm);
  Workspace& ws = comm.workspace();
  const int n = v.size();
  const int me = v.me();
  const size_t es = dtype_size(dtype);
  const size_t re = v.round_elems(es);
  const size_t align = std::max<size_t>(1, 64 / es);
  const size_t slice = std::max(align, ws.tuning.direct_slice_bytes / es / align * align);
  // Staging and reduction stay within a cache-sized round: ordinary stores.
  // The output is the whole message: past the LLC, stream it.
  const cpu::Store store = cpu::Store::kNormal;
  const cpu::Store out_store = v.store_for(count * es);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  ws.inputs.resize(n);

  for (size_t off = 0; off < count; off += re) {
    const size_t m = std::min(re, count - off);
    const uint64_t g = ws.next_round();
    const size_t part = ((m + n - 1) / n + align - 1) / align * align;
    const size_t slices = (part + slice - 1) / slice;
    // Elements [lo, lo+len) of the round: part p, slice k.
    auto range = [&](int p, size_t k, size_t& lo) -> size_t {
      lo = static_cast<size_t>(p) * part + k * slice;
      const size_t hi = std::min({lo + slice, static_cast<size_t>(p + 1) * part, m});
      return hi > lo ? hi - lo : 0;
    };
    std::byte* mine = v.staging(me, g);

    v.wait_half_free(g);
    // Step t stages slice t, reduces slice t-1 and gathers slice t-2, so a
    // slice is reduced and read back while it is still in the cache. Each
    // wait of step t is for something peers did in step t-1 or earlier,
    // before they waited themselves: the steps cannot deadlock.
    for (size_t t = 0; t < slices + 2; ++t) {
      if (t < slices) {  // (a)
        for (int p = 0; p < n; ++p) {
          size_t lo;
          if (size_t len = range(p, t, lo)) cpu::copy(mine + lo * es, in + (off + lo) * es, len * es, store);
        }
        v.publish(v.control(me).staged, flag_value(g, t + 1));
      }
      if (t >= 1 && t - 1 < slices) {  // (b)
        const size_t k = t - 1;
        size_t lo;
        if (size_t len = range(me, k, lo)) {
          for (int j = 0; j < n; ++j) {
            if (j != me) v.wait_at_least(j, &SegmentControl::staged, flag_value(g, k + 1));
            ws.inputs[j] = v.staging(j, g) + lo * es;
          }
          cpu::reduce_many(dtype, op, mine + lo * es, ws.inputs, len, store);
          if (op == ReduceOp::kAvg) cpu::finish_average(dtype, mine + lo * es, len, comm.size());
        }
        v.publish(v.control(me).reduced, flag_value(g, k + 1));
      }
      if (t >= 2) {  // (c)
        const size_t k = t - 2;
        for (int q = 1; q <= n; ++q) {
          const int p = (me + q) % n;
          size_t lo;
          if (size_t len = range(p, k, lo)) {
            if (p != me) v.wait_at_least(p, &SegmentControl::reduced, flag_value(g, k + 1));
            cpu::copy(out + (off + lo) * es, v.staging(p, g) + lo * es, len * es, out_store);
          }
        }
      }
    }
    v.finish_round(g);  // (d)
  }
}

}  // namespace ringlet::core::collectives
