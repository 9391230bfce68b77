// The alltoall through the window's halves (docs/gpu.md).
#include <algorithm>
#include <vector>

#include "core/gpu/ipc_window_algorithms.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/cuda.h"

namespace ringlet::core::gpu {

void window_alltoall(Rounds& rounds, DeviceQueue& q, const void* input,
                     std::span<const size_t> send_counts, void* output,
                     std::span<const size_t> recv_counts, size_t largest, size_t es) {
  const std::vector<size_t> send_at = offsets(send_counts), recv_at = offsets(recv_counts);
  uint64_t last = 0;
  const int n = rounds.size();
  const size_t slot = kHalfBytes / n / 16 * 16;  // bytes
  for (size_t off = 0; off < largest * es; off += slot) {
    const uint64_t g = last = rounds.begin();
    for (int lr = 0; lr < n; ++lr) {
      const int r = rounds.rank_of(lr);
      const size_t len = chunk(send_counts[r] * es, off, slot);
      if (lr == rounds.me() || len == 0) continue;
      q.copy(rounds.half(rounds.me(), g) + lr * slot, byte_at(input, send_at[r] * es + off), len,
             "into this rank's half");
    }
    rounds.publish(&SegmentControl::staged, g);
    for (int lr = 0; lr < n; ++lr) {
      const int r = rounds.rank_of(lr);
      const size_t len = chunk(recv_counts[r] * es, off, slot);
      if (lr == rounds.me() || len == 0) continue;
      rounds.wait(lr, &SegmentControl::staged, g);
      q.copy(byte_at(output, recv_at[r] * es + off), rounds.half(lr, g) + rounds.me() * slot, len,
             "from a peer's half");
    }
    rounds.end(g);
  }
  if (last > 0) rounds.drain(last);
}

}  // namespace ringlet::core::gpu
