// One-step allreduce through the shared-memory window (one host, small
// messages). Every rank copies its input into its staging half and publishes
// one flag; every rank then waits for all flags and reduce_many's the whole
// message from all staging copies, in local rank order, straight into its
// output (so all ranks compute the same bits). One synchronisation instead of
// the 2(n-1) of a ring or the three phases of the direct algorithm, at the
// price of every rank reducing all of it: cheap while the message is small
// (8 KiB, or 128 KiB when ranks outnumber cores and each synchronisation may
// cost a wake-up; see algorithm_table.cc for the measurements). The rank then
// publishes consumed, which frees its peers' halves for round g+2. Messages
// above a round (only when forced) go in several. Several tensors
// (allreduce_segments) are staged straight from the tensors (with the
// prescale) and reduced straight into each output, then scaled there by the
// result's one factor (the postscale, with an average's 1/n). Reported as one
// phase, ONESTEP_ALLREDUCE.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/collectives/window_layout.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::collectives {

void onestep_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                       double postscale) {
  namespace cpu = kernels::cpu;
  WindowView v(comm);
  Workspace& ws = comm.workspace();
  PhaseScope phase(ws, "ONESTEP_ALLREDUCE");
  const int n = v.size();
  const int me = v.me();
  const DataType dtype = s.dtype;
  const size_t es = s.es;
  const size_t count = s.total;
  const size_t re = v.round_elems(es);
  const double factor = kernels::ops::result_scale(op, postscale, comm.size());
  ws.inputs.resize(n);

  for (size_t off = 0; off < count; off += re) {
    const size_t m = std::min(re, count - off);
    const uint64_t g = ws.next_round();
    v.wait_half_free(g);
    s.read(v.staging(me, g), off, m, prescale, cpu::Store::kNormal);
    v.publish(v.control(me).staged, flag_value(g, 1));
    for (int j = 0; j < n; ++j) {
      if (j != me) v.wait_at_least(j, &SegmentControl::staged, flag_value(g, 1));
    }
    s.for_each(off, m, [&](size_t i, size_t at, size_t x, size_t len) {
      for (int j = 0; j < n; ++j) ws.inputs[j] = v.staging(j, g) + (x - off) * es;
      std::byte* out = static_cast<std::byte*>(s.out[i].data) + at * es;
      cpu::reduce_many(dtype, op, out, ws.inputs, len);
      cpu::scale(dtype, out, len, factor);
    });
    v.finish_round(g);
  }
}

}  // namespace ringlet::core::collectives
