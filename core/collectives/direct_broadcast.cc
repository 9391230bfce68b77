// Direct broadcast through the shared-memory window (one host), pipelined.
// The root copies the buffer into its staging half slice by slice, publishing
// staged = (g, k+1) after each; every other rank copies each slice into its
// buffer as soon as the flag shows it, so all readers work while the root is
// still writing: the time is about one copy of the buffer plus one slice. The
// root stages at most a round (window_layout.h) at a time and stages round g+2 only after every
// reader consumed round g. Slices of direct_slice_bytes: small enough for the
// readers to start early, large enough that flags cost nothing.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/collectives/window_layout.h"

namespace ringlet::core::collectives {

void direct_broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root) {
  namespace cpu = kernels::cpu;
  WindowView v(comm);
  Workspace& ws = comm.workspace();
  const auto& locals = comm.world().ranks_on_host[comm.world().cross_rank];
  const int root_lr =
      static_cast<int>(std::find(locals.begin(), locals.end(), root) - locals.begin());
  const int me = v.me();
  const size_t es = dtype_size(dtype);
  const size_t re = v.round_elems(es);
  const size_t slice = std::max<size_t>(1, ws.tuning.direct_slice_bytes / es);
  const cpu::Store store = v.store_for(count * es);
  auto* data = static_cast<std::byte*>(buffer);

  for (size_t lo = 0; lo < count; lo += re) {
    const size_t hi = std::min(count, lo + re);
    const uint64_t g = ws.next_round();
    if (me == root_lr) {
      v.wait_half_free(g);
      std::byte* staging = v.staging(me, g);
      for (size_t k = 0; lo + k * slice < hi; ++k) {
        const size_t s0 = lo + k * slice, s1 = std::min(hi, s0 + slice);
        cpu::copy(staging + (s0 - lo) * es, data + s0 * es, (s1 - s0) * es);
        v.publish(v.control(me).staged, flag_value(g, k + 1));
      }
    } else {
      const std::byte* staging = v.staging(root_lr, g);
      for (size_t k = 0; lo + k * slice < hi; ++k) {
        const size_t s0 = lo + k * slice, s1 = std::min(hi, s0 + slice);
        v.wait_at_least(root_lr, &SegmentControl::staged, flag_value(g, k + 1));
        cpu::copy(data + s0 * es, staging + (s0 - lo) * es, (s1 - s0) * es, store);
      }
    }
    v.finish_round(g);
  }
}

}  // namespace ringlet::core::collectives
