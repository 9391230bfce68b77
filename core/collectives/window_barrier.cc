// Barrier through the shared-memory window: one round in which every rank
// publishes staged = (g, 1) and waits for everyone's. One flag per rank and a
// doorbell: a few hundred nanoseconds while ranks have cores, a futex wake
// when they sleep.
#include "core/collectives/algorithms.h"
#include "core/collectives/window_layout.h"

namespace ringlet::core::collectives {

void window_barrier(Communicator& comm) {
  WindowView v(comm);
  const uint64_t g = comm.workspace().next_round();
  v.publish(v.control(v.me()).staged, flag_value(g, 1));
  for (int p = 0; p < v.size(); ++p) {
    if (p != v.me()) v.wait_at_least(p, &SegmentControl::staged, flag_value(g, 1));
  }
  v.finish_round(g);
}

}  // namespace ringlet::core::collectives
