// The allreduce as Ringlet's ring over the window's halves
// (RINGLET_ALGORITHM=ring; round_plan.h: ring_steps): after the pack, each
// step reduces (or, in the allgather, copies) one part of the predecessor's
// half into this rank's own, so a rank reads only its predecessor's memory,
// the pattern for GPUs linked in a ring rather than all to all; every part
// is reduced once, by a chain in one order, so all ranks hold the same bits.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/gpu/ipc_window_algorithms.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/cuda.h"

namespace ringlet::core::gpu {

void ring_allreduce(Rounds& rounds, DeviceQueue& q, std::span<const DeviceSegment> tensors,
                    DataType dtype, ReduceOp op, double prescale, double postscale,
                    uint64_t& last) {
  const int n = rounds.size();
  const int me = rounds.me();
  const int prev = (me + n - 1) % n;
  const size_t es = dtype_size(dtype);
  const std::vector<RingStep> steps = ring_steps(n, me);
  for (const Round& r : plan_rounds(counts_of(tensors), es, n, kHalfBytes)) {
    const uint64_t g = last = rounds.begin();
    std::byte* mine = rounds.half(me, g);
    const std::byte* theirs = rounds.half(prev, g);
    // This round's tables: the pack segments, then the unpack segments.
    q.segment_table.clear();
    q.pointer_table.clear();
    const int packed = add_pieces(q, tensors, r.pieces, es, true);
    add_pieces(q, tensors, r.pieces, es, false);
    q.upload_tables();
    q.check(
        kernels::cuda::pack(dtype, mine, q.segment(0), packed, r.count, prescale, q.stream.get()),
        "the pack kernel (CUDA IPC ring allreduce)");
    rounds.publish(&SegmentControl::staged, g);
    for (size_t t = 0; t < steps.size(); ++t) {
      const RingStep& s = steps[t];
      if (t == 0) {
        rounds.wait(prev, &SegmentControl::staged, g);
      } else {
        rounds.wait(prev, &SegmentControl::reduced, g, t);
      }
      std::byte* part = mine + r.part_begin(s.part) * es;
      const std::byte* from = theirs + r.part_begin(s.part) * es;
      const size_t len = r.part_length(s.part);
      if (s.reduce) {
        q.check(kernels::cuda::reduce(dtype, op, part, from, part, len, q.stream.get()),
                "the reduce kernel (CUDA IPC ring allreduce)");
        // The last reduction completes this rank's part: the result's
        // one scale (the postscale, with an average's 1/n) happens once,
        // before the allgather hands the part on.
        if (t + 2 == static_cast<size_t>(n)) q.finish(dtype, op, part, len, n, postscale);
      } else {
        q.copy(part, from, len * es, "from the predecessor's half");
      }
      rounds.publish(&SegmentControl::reduced, g, t + 1);
    }
    q.check(
        kernels::cuda::unpack(dtype, mine, q.segment(packed), packed, r.count, 1.0, q.stream.get()),
        "the unpack kernel (CUDA IPC ring allreduce)");
    rounds.end(g);
  }
}

}  // namespace ringlet::core::gpu
