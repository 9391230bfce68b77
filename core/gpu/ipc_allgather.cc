// The allgather through the window's halves (docs/gpu.md).
#include <algorithm>
#include <vector>

#include "core/gpu/ipc_window_algorithms.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/cuda.h"

namespace ringlet::core::gpu {

void window_allgather(Rounds& rounds, DeviceQueue& q, const void* input,
                      std::span<const size_t> counts, void* output, size_t es) {
  const std::vector<size_t> at = offsets(counts);
  const int me = rounds.rank_of(rounds.me());
  uint64_t last = 0;
  const size_t largest = *std::max_element(counts.begin(), counts.end()) * es;
  for (size_t off = 0; off < largest; off += kHalfBytes) {
    const uint64_t g = last = rounds.begin();
    q.copy(rounds.half(rounds.me(), g), byte_at(input, off),
           chunk(counts[me] * es, off, kHalfBytes), "into this rank's half");
    rounds.publish(&SegmentControl::staged, g);
    for (int lr = 0; lr < rounds.size(); ++lr) {
      const int r = rounds.rank_of(lr);
      const size_t len = chunk(counts[r] * es, off, kHalfBytes);
      if (lr == rounds.me() || len == 0) continue;
      rounds.wait(lr, &SegmentControl::staged, g);
      q.copy(byte_at(output, at[r] * es + off), rounds.half(lr, g), len, "from a peer's half");
    }
    rounds.end(g);
  }
  if (last > 0) rounds.drain(last);
}

}  // namespace ringlet::core::gpu
