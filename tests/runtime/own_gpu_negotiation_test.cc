// One rank per GPU, the usual GPU job: each rank's tensors live on its own
// device (cuda:0 on rank 0, cuda:1 on rank 1, ...). Negotiation, fusion and
// the response cache must accept that, and hand each rank its own device;
// only host memory beside device memory for one name is a mismatch.
#include <gtest/gtest.h>

#include "core/runtime/cache_coordinator.h"
#include "core/runtime/negotiation.h"

namespace ringlet::core::runtime {
namespace {

Metadata on(int32_t device, const std::string& name, int64_t n = 8) {
  Metadata m;
  m.name = name;
  m.shape = {n};
  m.device = device;
  return m;
}

TEST(OwnGpuNegotiation, RanksOnDifferentGpusRunEachOnItsOwn) {
  Negotiator n(3);
  std::vector<RankMessage> c(3);
  for (int r = 0; r < 3; ++r) c[r].ready = {on(r, "fc1.weight")};
  const auto resp = n.add_cycle(c, 1 << 20);
  ASSERT_EQ(resp.size(), 1u);
  EXPECT_EQ(resp[0].error, "");
  EXPECT_EQ(resp[0].devices, (std::vector<int32_t>{0, 1, 2}));
}

TEST(OwnGpuNegotiation, HostTensorsCarryNoDevices) {
  Negotiator n(2);
  std::vector<RankMessage> c(2);
  for (int r = 0; r < 2; ++r) c[r].ready = {on(-1, "a")};
  const auto resp = n.add_cycle(c, 1 << 20);
  ASSERT_EQ(resp.size(), 1u);
  EXPECT_TRUE(resp[0].devices.empty());
}

TEST(OwnGpuNegotiation, HostBesideDeviceIsAMismatchNamingBoth) {
  Negotiator n(3);
  std::vector<RankMessage> c(3);
  c[0].ready = {on(0, "fc1.weight")};
  c[1].ready = {on(1, "fc1.weight")};
  c[2].ready = {on(-1, "fc1.weight")};
  const auto resp = n.add_cycle(c, 1 << 20);
  ASSERT_EQ(resp.size(), 1u);
  EXPECT_EQ(resp[0].error,
            "Mismatched allreduce devices (host and GPU memory for one collective) for "
            "'fc1.weight': rank 0 sent cuda:0, rank 2 sent cpu");
}

TEST(OwnGpuNegotiation, FusesOnlyTensorsWhoseRanksUseTheSameDevicesEach) {
  Negotiator n(2);
  std::vector<RankMessage> c(2);
  // a and b: rank 0 on cuda:0, rank 1 on cuda:1 (fused); c: rank 1 on cuda:2
  // (a rank's tensors on two GPUs cannot share one fusion buffer).
  c[0].ready = {on(0, "a"), on(0, "b"), on(0, "c")};
  c[1].ready = {on(1, "a"), on(1, "b"), on(2, "c")};
  const auto resp = n.add_cycle(c, 1 << 20);
  ASSERT_EQ(resp.size(), 2u);
  EXPECT_EQ(resp[0].names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(resp[0].devices, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(resp[1].names, std::vector<std::string>{"c"});
  EXPECT_EQ(resp[1].devices, (std::vector<int32_t>{0, 2}));
}

TEST(OwnGpuNegotiation, AGroupAcrossDevicesOfOneRankIsRefused) {
  Negotiator n(2);
  auto member = [](int32_t device, const std::string& name) {
    Metadata m = on(device, name);
    m.group = "g";
    m.group_size = 2;
    return m;
  };
  std::vector<RankMessage> c(2);
  c[0].ready = {member(0, "a"), member(0, "b")};
  c[1].ready = {member(1, "a"), member(2, "b")};
  const auto resp = n.add_cycle(c, 1 << 20);
  ASSERT_EQ(resp.size(), 1u);
  EXPECT_NE(resp[0].error.find("cannot be fused"), std::string::npos) << resp[0].error;
  EXPECT_TRUE(resp[0].devices.empty());
}

// Two ranks, each with its coordinator and negotiator, step after step: the
// same name on cuda:0 and cuda:1 goes as a bit from the second step on, and
// every rank's agreed response still carries both devices.
TEST(OwnGpuNegotiation, TheResponseCacheHitsEveryStepForRanksOnTheirOwnGpus) {
  std::vector<CacheCoordinator> cache;
  std::vector<Negotiator> negotiators;
  for (int r = 0; r < 2; ++r) {
    cache.emplace_back(16, r);
    negotiators.emplace_back(2);
  }
  std::vector<Metadata> mine = {on(0, "grad"), on(1, "grad")};
  for (int step = 0; step < 4; ++step) {
    std::vector<RankMessage> messages(2);
    for (int r = 0; r < 2; ++r) {
      cache[r].report(mine[r], messages[r]);
      cache[r].set_bits(messages[r]);
      if (step > 0) {
        EXPECT_TRUE(messages[r].ready.empty()) << "step " << step << " rank " << r;
        EXPECT_TRUE(messages[r].invalidate.empty()) << "step " << step << " rank " << r;
      }
    }
    for (int r = 0; r < 2; ++r) {
      std::vector<Response> responses =
          negotiators[r].add_cycle(messages, 1 << 20, cache[r].agreed(messages, {false, false}));
      cache[r].record(responses);
      ASSERT_EQ(responses.size(), 1u) << "step " << step;
      EXPECT_EQ(responses[0].error, "");
      EXPECT_EQ(responses[0].devices, (std::vector<int32_t>{0, 1})) << "step " << step;
      cache[r].forget("grad");
    }
  }
  // A rank that moves the tensor to another GPU misses, and the slot goes.
  RankMessage moved;
  cache[1].report(on(3, "grad"), moved);
  EXPECT_EQ(moved.ready.size(), 1u);
  EXPECT_EQ(moved.invalidate.size(), 1u);
}

}  // namespace
}  // namespace ringlet::core::runtime
