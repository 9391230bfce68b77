#include "core/gpu/peer_reach.h"

#include <algorithm>
#include <map>

namespace ringlet::core::gpu {

namespace {

bool has_peer(const GpuReach& from, const GpuUuid& to) {
  const uint32_t n = std::min(from.peer_count, GpuReach::kMaxPeers);
  return std::find(from.peers.begin(), from.peers.begin() + n, to) != from.peers.begin() + n;
}

}  // namespace

std::vector<std::pair<int, int>> unreachable_pairs(std::span<const GpuReach> ranks) {
  std::vector<std::pair<int, int>> out;
  for (size_t a = 0; a < ranks.size(); ++a) {
    for (size_t b = a + 1; b < ranks.size(); ++b) {
      const GpuReach &x = ranks[a], &y = ranks[b];
      const bool reach = x.uuid == y.uuid || (has_peer(x, y.uuid) && has_peer(y, x.uuid));
      if (!reach) out.emplace_back(static_cast<int>(a), static_cast<int>(b));
    }
  }
  return out;
}

WaitingKernels plan_waiting_kernels(std::span<const GpuShare> ranks, int max_blocks) {
  std::map<GpuUuid, int> sharing;  // GPU -> ranks on it
  for (const GpuShare& r : ranks) ++sharing[r.uuid];
  WaitingKernels plan{.concurrent = true, .blocks = max_blocks};
  for (const GpuShare& r : ranks) {
    const int n = sharing[r.uuid];
    plan.concurrent = plan.concurrent && (n == 1 || r.mps);
    plan.blocks = std::min(plan.blocks, std::max(1, r.resident / n));
  }
  return plan;
}

}  // namespace ringlet::core::gpu
