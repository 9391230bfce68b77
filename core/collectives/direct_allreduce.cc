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
//       of every input before writing it), scales it by the result's one
//       factor (the postscale, with an average's 1/n), and publishes
//       reduced = (g, k+1).
//   (c) gather: every rank copies every part's slice k from its owner's staging
//       into its output as the owner's reduced flag shows it, starting with the
//       next rank's part so that owners are not all read at once.
//   (d) publish consumed = g.
// The three phases run as a pipeline over the slices (step t stages slice t,
// reduces t-1, gathers t-2), so each slice is still in the cache when it is
// reduced and read back. The half is staged again at round g+2, after
//       every peer consumed round g: nearly always already true.
// Every result element comes from one reduction in one fixed order and one
// scaling, by its owner, so all ranks hold bit-identical results. Per rank
// and byte: one staging write, a 1/n share of the reduction, one read of the
// result: no ring forwarding.
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
//
// Several tensors (allreduce_segments) run as one message: the stage step
// reads each range straight from the tensors and applies the prescale on the
// way, the gather step copies the finished parts straight into them, so a
// fused allreduce costs what one tensor of the same size does, with no fusion
// buffer in between.
//
// Larger rounds when ranks outnumber cores (fewer synchronisations, each of
// which may cost a wake-up) do not pay: 256 tensors of 64 KiB at np=4 on 2
// cores took 8-10 ms with 8 MiB rounds against 3.3-4.8 ms with 1 MiB, as the
// four ranks' staging halves outgrow the shared L3; 512 KiB and 2 MiB rounds
// were within the noise of 1 MiB. The fused message is bound by memory
// bandwidth there: every rank reads 16 MiB of input and writes 16 MiB of
// output, about 3.8 ms for the four ranks at this machine's ~18 GB/s copy rate.
//
// Phases reported (PhaseScope), per round: DIRECT_REDUCESCATTER for the steps
// that stage or reduce (with one slice per part: staging and the reduction of
// this rank's part; with more, the gathers of early slices that overlap them),
// then DIRECT_ALLGATHER for the steps that only gather.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/collectives/window_layout.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::collectives {

void direct_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                      double postscale) {
  namespace cpu = kernels::cpu;
  WindowView v(comm);
  Workspace& ws = comm.workspace();
  const int n = v.size();
  const int me = v.me();
  const DataType dtype = s.dtype;
  const size_t es = s.es;
  const size_t count = s.total;
  const size_t re = v.round_elems(es);
  const size_t align = std::max<size_t>(1, 64 / es);
  const size_t slice = std::max(align, ws.tuning.direct_slice_bytes / es / align * align);
  // Staging and reduction stay within a cache-sized round: ordinary stores.
  // The output is the whole message: past the LLC, stream it.
  const cpu::Store store = cpu::Store::kNormal;
  const cpu::Store out_store = v.store_for(count * es);
  const double factor = kernels::ops::result_scale(op, postscale, comm.size());
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
    size_t first, end;
    s.tensors_of(off, m, first, end);
    PhaseScope phase(ws, "DIRECT_REDUCESCATTER", first, end);

    v.wait_half_free(g);
    // Step t stages slice t, reduces slice t-1 and gathers slice t-2, so a
    // slice is reduced and read back while it is still in the cache. Each
    // wait of step t is for something peers did in step t-1 or earlier,
    // before they waited themselves: the steps cannot deadlock.
    for (size_t t = 0; t < slices + 2; ++t) {
      if (t == slices + 1) phase.next("DIRECT_ALLGATHER");
      if (t < slices) {  // (a)
        for (int p = 0; p < n; ++p) {
          size_t lo;
          if (size_t len = range(p, t, lo)) s.read(mine + lo * es, off + lo, len, prescale, store);
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
          cpu::scale(dtype, mine + lo * es, len, factor);
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
            s.write(v.staging(p, g) + lo * es, off + lo, len, out_store);
          }
        }
      }
    }
    v.finish_round(g);  // (d)
  }
}

}  // namespace ringlet::core::collectives
