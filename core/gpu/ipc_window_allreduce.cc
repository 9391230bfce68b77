// The event-ordered allreduce through the window's halves. Each round takes
// up to a half (kHalfBytes) of the fused message and cuts it into one part
// per rank, each starting on 16 bytes:
//   (a) stage: every rank packs its tensors' share of the round into its own
//       half, with the prescale, and publishes staged;
//   (b) reduce: rank i reads part i of every rank's half (reduce_many, ranks
//       in local order, so every element comes from one reduction in one
//       order and all ranks hold bit-identical results), writes it in place
//       in its own half, scales it by the result's one factor (the
//       postscale, with an average's 1/n), and publishes reduced;
//   (c) unpack: every rank copies each part from its owner's half into the
//       tensors, and publishes consumed.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/gpu/ipc_window_algorithms.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/cuda.h"

namespace ringlet::core::gpu {

void window_allreduce(Rounds& rounds, DeviceQueue& q, std::span<const DeviceSegment> tensors,
                      DataType dtype, ReduceOp op, double prescale, double postscale,
                      uint64_t& last) {
  const int n = rounds.size();
  const int me = rounds.me();
  const size_t es = dtype_size(dtype);
  for (const Round& r : plan_rounds(counts_of(tensors), es, n, kHalfBytes)) {
    const uint64_t g = last = rounds.begin();
    // This round's tables: the pack segments, then the unpack segments of
    // each part, and the inputs of this rank's reduction.
    q.segment_table.clear();
    q.pointer_table.clear();
    const int packed = add_pieces(q, tensors, r.pieces, es, true);
    std::vector<int> first(n + 1, packed);
    for (int p = 0; p < n; ++p)
      first[p + 1] = first[p] + add_pieces(q, tensors, r.part_pieces(p), es, false);
    const size_t my_lo = r.part_begin(me);
    const size_t my_len = r.part_length(me);
    for (int lr = 0; lr < n; ++lr) q.pointer_table.push_back(rounds.half(lr, g) + my_lo * es);
    q.upload_tables();

    std::byte* mine = rounds.half(me, g);
    q.check(
        kernels::cuda::pack(dtype, mine, q.segment(0), packed, r.count, prescale, q.stream.get()),
        "the pack kernel (CUDA IPC allreduce)");
    rounds.publish(&SegmentControl::staged, g);
    rounds.wait_all(&SegmentControl::staged, g);
    q.check(kernels::cuda::reduce_many(dtype, op, mine + my_lo * es, q.pointer(0), n, my_len,
                                       q.stream.get()),
            "the reduce kernel (CUDA IPC allreduce)");
    q.finish(dtype, op, mine + my_lo * es, my_len, n, postscale);
    rounds.publish(&SegmentControl::reduced, g);
    rounds.wait_all(&SegmentControl::reduced, g);
    for (int p = 0; p < n; ++p) {
      q.check(kernels::cuda::unpack(dtype, rounds.half(p, g), q.segment(first[p]),
                                    first[p + 1] - first[p], r.count, 1.0, q.stream.get()),
              "the unpack kernel (CUDA IPC allreduce)");
    }
    rounds.end(g);
  }
}

}  // namespace ringlet::core::gpu
