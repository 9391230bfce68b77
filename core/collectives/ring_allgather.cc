// Ring allgather with per-rank counts (see ring_engine.h for the order of
// units). At step s the rank at ring position p sends block p-s (its own at
// step 0) to its right neighbour and receives block p-s-1 from its left one
// straight into its place in the output, from where it is forwarded at step
// s+1: every byte is written once per rank and no scratch is needed. Blocks of
// zero elements take no posts.
//
// Sub-chunks of ring_slice_bytes with ring_in_flight posts per direction, as
// in the reduce-scatter (see there for why).
#include "core/collectives/algorithms.h"
#include "core/collectives/ring_engine.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::collectives {

namespace {

struct AllgatherPolicy {
  static constexpr bool kSlots = false;
  const RingPlan& plan;
  std::byte* recv;

  std::byte* recv_target(int block, size_t first, size_t, std::byte*) {
    return recv + (plan.offsets[block] + first) * plan.es;
  }
  const std::byte* first_send(int block, size_t first) {
    return recv + (plan.offsets[block] + first) * plan.es;
  }
  const std::byte* on_received(int, int, size_t, size_t, std::byte* target) { return target; }
};

}  // namespace

void ring_allgather(Communicator& comm, const void* send, void* recv,
                    std::span<const size_t> counts, DataType dtype) {
  RingPlan plan(comm, counts, dtype_size(dtype));
  auto* out = static_cast<std::byte*>(recv);
  std::byte* own = out + plan.offsets[comm.rank()] * plan.es;
  if (own != send && counts[comm.rank()] > 0) {
    kernels::cpu::copy(own, send, counts[comm.rank()] * plan.es);
  }
  AllgatherPolicy pol{plan, out};
  run_ring(comm, plan, 1, pol);
}

}  // namespace ringlet::core::collectives
