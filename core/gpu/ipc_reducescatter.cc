// The reducescatter through the window's halves (docs/gpu.md).
#include <algorithm>
#include <vector>

#include "core/gpu/ipc_window_algorithms.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/cuda.h"

namespace ringlet::core::gpu {

void window_reducescatter(Rounds& rounds, DeviceQueue& q, const void* input,
                          std::span<const size_t> counts, void* output, DataType dtype, ReduceOp op,
                          double prescale, double postscale) {
  const size_t es = dtype_size(dtype);
  const std::vector<size_t> at = offsets(counts);
  const int me = rounds.rank_of(rounds.me());
  const int n = rounds.size();
  const size_t slot = kHalfBytes / es / n / padded(1, es) * padded(1, es);  // elements
  const size_t largest = *std::max_element(counts.begin(), counts.end());
  uint64_t last = 0;
  for (size_t off = 0; off < largest; off += slot) {
    const uint64_t g = last = rounds.begin();
    q.segment_table.clear();
    q.pointer_table.clear();
    for (int lr = 0; lr < n; ++lr) {
      const int r = rounds.rank_of(lr);
      if (const size_t len = chunk(counts[r], off, slot)) {
        q.segment_table.push_back(
            {const_cast<std::byte*>(byte_at(input, (at[r] + off) * es)), lr * slot, len});
      }
      q.pointer_table.push_back(rounds.half(lr, g) + rounds.me() * slot * es);
    }
    q.upload_tables();
    q.check(kernels::cuda::pack(dtype, rounds.half(rounds.me(), g), q.segment(0),
                                static_cast<int>(q.segment_table.size()), n * slot, prescale,
                                q.stream.get()),
            "the pack kernel (CUDA IPC reducescatter)");
    rounds.publish(&SegmentControl::staged, g);
    rounds.wait_all(&SegmentControl::staged, g);
    if (const size_t len = chunk(counts[me], off, slot)) {
      void* out = byte_at(output, off * es);
      q.check(kernels::cuda::reduce_many(dtype, op, out, q.pointer(0), n, len, q.stream.get()),
              "the reduce kernel (CUDA IPC reducescatter)");
      q.finish(dtype, op, out, len, n, postscale);
    }
    rounds.end(g);
  }
  if (last > 0) rounds.drain(last);
}

}  // namespace ringlet::core::gpu
