// The broadcast through the window's halves (docs/gpu.md).
#include <algorithm>
#include <vector>

#include "core/gpu/ipc_window_algorithms.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/cuda.h"

namespace ringlet::core::gpu {

void window_broadcast(Rounds& rounds, DeviceQueue& q, void* buffer, size_t bytes, int root_lr) {
  auto* data = static_cast<std::byte*>(buffer);
  // The root stages each round in its half; the others copy it from there.
  uint64_t last = 0;
  for (size_t off = 0; off < bytes; off += kHalfBytes) {
    const size_t m = std::min(kHalfBytes, bytes - off);
    const uint64_t g = last = rounds.begin();
    if (rounds.me() == root_lr) {
      q.check(cudaMemcpyAsync(rounds.half(root_lr, g), data + off, m, cudaMemcpyDeviceToDevice,
                              q.stream.get()),
              "cudaMemcpyAsync into the root's half (CUDA IPC broadcast)");
      rounds.publish(&SegmentControl::staged, g);
    } else {
      rounds.wait(root_lr, &SegmentControl::staged, g);
      q.check(cudaMemcpyAsync(data + off, rounds.half(root_lr, g), m, cudaMemcpyDeviceToDevice,
                              q.stream.get()),
              "cudaMemcpyAsync from the root's half (CUDA IPC broadcast)");
    }
    rounds.end(g);
  }
  if (last > 0) rounds.drain(last);
}

}  // namespace ringlet::core::gpu
