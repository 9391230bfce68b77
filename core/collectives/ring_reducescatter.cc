// Ring reduce-scatter with per-rank counts (see ring_engine.h for the order of
// units). At step s the rank at ring position p sends its partial sum of block
// p-s-1 and receives the left neighbour's partial of block p-s-2 into a scratch
// slot; it reduces its own contribution into that slot and forwards the slot
// at step s+1. At the last step (s = n-2) the received partial of block p is
// reduced with the own contribution straight into the output, so the result is
// written once and no full-size temporary exists; the result's one scale (the
// postscale, with an average's 1/n) follows there, sub-chunk by sub-chunk
// while it is in the cache. Step 0 sends straight from the caller's buffer.
//
// Sub-chunks of ring_slice_bytes (256 KiB) with 4 posts in flight per
// direction: large enough that a post's fixed cost (a syscall on TCP, a flag
// on shm) is small against its bytes, small enough that 2*4+2 slots stay in
// the L2/L3 and that the first forward starts early. Slots are allocated once
// per communicator.
#include <cstring>

#include "core/collectives/algorithms.h"
#include "core/collectives/ring_engine.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::collectives {

namespace {

struct ReduceScatterPolicy {
  static constexpr bool kSlots = true;
  const RingPlan& plan;
  const std::byte* send;
  std::byte* own_out;
  DataType dtype;
  ReduceOp op;
  double factor;  // the result's scale, applied once by the block's owner
  bool scaled;    // factor != 1.0, decided once rather than per sub-chunk

  std::byte* recv_target(int, size_t, size_t, std::byte* slot) { return slot; }
  const std::byte* first_send(int block, size_t first) {
    return send + (plan.offsets[block] + first) * plan.es;
  }
  const std::byte* on_received(int s, int block, size_t first, size_t count, std::byte* slot) {
    const std::byte* mine = send + (plan.offsets[block] + first) * plan.es;
    const bool last = s == plan.n - 2;
    std::byte* out = last ? own_out + first * plan.es : slot;
    kernels::cpu::reduce(dtype, op, out, slot, mine, count);
    if (last && scaled) kernels::cpu::scale(dtype, out, count, factor);
    return slot;
  }
};

}  // namespace

void ring_reducescatter(Communicator& comm, const void* send, void* own_out,
                        std::span<const size_t> counts, DataType dtype, ReduceOp op,
                        double postscale) {
  RingPlan plan(comm, counts, dtype_size(dtype));
  const int me = comm.rank();
  auto* out = static_cast<std::byte*>(own_out);
  const auto* in = static_cast<const std::byte*>(send);
  // The output may be the caller's own block of `send` (in place), which the
  // last step reads exactly where it writes. Any other overlap would clobber
  // input still to be sent: reduce into a temporary then.
  const size_t total_bytes = (plan.offsets[plan.n - 1] + counts[plan.n - 1]) * plan.es;
  const size_t own_bytes = counts[me] * plan.es;
  std::vector<std::byte> temp;
  if (out != in + plan.offsets[me] * plan.es && out < in + total_bytes && in < out + own_bytes) {
    temp.resize(own_bytes);
    out = temp.data();
  }
  const double factor = kernels::ops::result_scale(op, postscale, comm.size());
  ReduceScatterPolicy pol{plan, in, out, dtype, op, factor, factor != 1.0};
  run_ring(comm, plan, 0, pol);
  if (!temp.empty()) std::memcpy(own_out, temp.data(), own_bytes);
}

}  // namespace ringlet::core::collectives
