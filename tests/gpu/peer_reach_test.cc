// Which ranks of a host reach each other's GPU memory, from the records they
// publish (no device needed): the same GPU, or peer access both ways; any
// other pair stages through host memory.
#include "core/gpu/peer_reach.h"

#include <gtest/gtest.h>

#include "core/collectives/algorithm_table.h"

namespace ringlet::core::gpu {
namespace {

GpuUuid gpu(uint8_t n) {
  GpuUuid u{};
  u[0] = n;
  u[15] = static_cast<uint8_t>(0xa0 + n);
  return u;
}

GpuReach on(uint8_t n, std::initializer_list<uint8_t> peers) {
  GpuReach r;
  r.uuid = gpu(n);
  for (uint8_t p : peers) r.peers[r.peer_count++] = gpu(p);
  return r;
}

using Pairs = std::vector<std::pair<int, int>>;

TEST(PeerReach, RanksSharingOneGpuReachEachOther) {
  const std::vector<GpuReach> ranks = {on(0, {}), on(0, {}), on(0, {})};
  EXPECT_EQ(unreachable_pairs(ranks), Pairs{});
}

TEST(PeerReach, OwnGpusWithPeerAccessBothWaysReachEachOther) {
  // An NVLink host: every GPU reaches every other.
  const std::vector<GpuReach> ranks = {on(0, {1, 2, 3}), on(1, {0, 2, 3}), on(2, {0, 1, 3}),
                                       on(3, {0, 1, 2})};
  EXPECT_EQ(unreachable_pairs(ranks), Pairs{});
}

TEST(PeerReach, PairsWithoutPeerAccessAreNamed) {
  // A PCIe server with two switches: 0-1 and 2-3 reach each other, not across;
  // and access one way only is not enough.
  const std::vector<GpuReach> ranks = {on(0, {1}), on(1, {0}), on(2, {3}), on(3, {2, 0})};
  EXPECT_EQ(unreachable_pairs(ranks), (Pairs{{0, 2}, {0, 3}, {1, 2}, {1, 3}}));
}

TEST(PeerReach, AGpuThisProcessCannotSeeIsUnreachable) {
  // Each rank sees only its own GPU (CUDA_VISIBLE_DEVICES per rank): it can
  // ask about no other, so the pair stages through the host.
  const std::vector<GpuReach> ranks = {on(0, {}), on(1, {})};
  EXPECT_EQ(unreachable_pairs(ranks), (Pairs{{0, 1}}));
}

TEST(PeerReach, UuidsAreWrittenAsNvidiaSmiWritesThem) {
  GpuUuid u{};
  for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(0x10 * (i % 16) + i);
  EXPECT_EQ(uuid_text(u), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

// The kernels that wait on each other run at once where each GPU holds one
// rank (the usual job) or MPS shares it; then the device rows take them.
TEST(WaitingKernels, RunAtOnceOnOwnGpusOrUnderMpsAndTheDeviceRowsTakeThem) {
  using collectives::Algorithm;
  const auto rows = collectives::device_rows(collectives::Tuning{});
  auto chosen = [&](const WaitingKernels& plan, size_t bytes) {
    const collectives::PlacementFacts facts{
        .hosts = 1, .window = true, .concurrent_kernels = plan.concurrent};
    return collectives::select(rows, facts, std::nullopt, collectives::Collective::kAllreduce,
                               bytes);
  };
  const std::vector<GpuShare> own = {
      {gpu(0), 132, false}, {gpu(1), 132, false}, {gpu(2), 100, false}, {gpu(3), 132, false}};
  const WaitingKernels on_own = plan_waiting_kernels(own, 64);
  EXPECT_TRUE(on_own.concurrent);
  EXPECT_EQ(on_own.blocks, 64);
  EXPECT_EQ(chosen(on_own, 1024), Algorithm::kOneStep);
  EXPECT_EQ(chosen(on_own, size_t{64} << 20), Algorithm::kTwoShot);

  const std::vector<GpuShare> shared = {{gpu(0), 132, false}, {gpu(0), 132, false}};
  const WaitingKernels in_turns = plan_waiting_kernels(shared, 64);
  EXPECT_FALSE(in_turns.concurrent);
  EXPECT_EQ(chosen(in_turns, 1024), Algorithm::kDirect);

  const std::vector<GpuShare> mps = {
      {gpu(0), 100, true}, {gpu(0), 100, true}, {gpu(0), 100, true}, {gpu(1), 132, false}};
  const WaitingKernels under_mps = plan_waiting_kernels(mps, 64);
  EXPECT_TRUE(under_mps.concurrent);
  EXPECT_EQ(under_mps.blocks, 33);  // 100 resident blocks over the 3 ranks sharing GPU 0
  EXPECT_EQ(chosen(under_mps, 1024), Algorithm::kOneStep);
}

}  // namespace
}  // namespace ringlet::core::gpu
