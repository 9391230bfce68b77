// One-step allreduce through the shared-memory window (one host, small
// messages). Every rank copies its input into its staging half and publishes
// one flag; every rank then waits for all flags and reduce_many's the whole
// message from all staging copies, in local rank order, straight into its
// output (so all ranks compute the same bits). One synchronisation instead of
// the 2(n-1) of a ring or the three phases of the direct algorithm, at the
// price of every rank reducing all of it: cheap while the message is small
// (8 KiB, or 128 KiB when ranks outnumber cores and each synchronisation may
// cost a wake-up; see algorithm_table.cc for the measurements). The rank then publishes consumed, which frees its peers' halves for
// round g+2. Messages above a round (only when forced) go in several.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/collectives/window_layout.h"

namespace ringlet::core::collectives {

void onestep_allreduce(Communicator& comm, const void* send, void* recv, size_t count,
                       DataType dtype, ReduceOp op) {
  namespace cpu = kernels::cpu;
  WindowView v(comm);
  Workspace& ws = comm.workspace();
  const int n = v.size();
  const int me = v.me();
  const size_t es = dtype_size(dtype);
  const size_t re = v.round_elems(es);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  ws.inputs.resize(n);

  for (size_t off = 0; off < count; off += re) {
    const size_t m = std::min(re, count - off);
    const uint64_t g = ws.next_round();
    v.wait_half_free(g);
    cpu::copy(v.staging(me, g), in + off * es, m * es);
    v.publish(v.control(me).staged, flag_value(g, 1));
    for (int j = 0; j < n; ++j) {
      if (j != me) v.wait_at_least(j, &SegmentControl::staged, flag_value(g, 1));
      ws.inputs[j] = v.staging(j, g);
    }
    cpu::reduce_many(dtype, op, out + off * es, ws.inputs, m);
    if (op == ReduceOp::kAvg) cpu::finish_average(dtype, out + off * es, m, comm.size());
    v.finish_round(g);
  }
}

}  // namespace ringlet::core::collectives
