// The cache coordinator alone: two coordinators stand for two ranks, and the
// test carries their messages between them as the negotiation would.
#include "core/runtime/cache_coordinator.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace ringlet::core::runtime {
namespace {

Metadata allreduce(const std::string& name, int64_t n) {
  Metadata m;
  m.name = name;
  m.shape = {n};
  return m;
}

Response ran(const Metadata& m) {
  Response r;
  r.names = {m.name};
  r.meta = {m};
  return r;
}

// Both ranks cached `m` (it ran once).
void cache_on_both(CacheCoordinator& a, CacheCoordinator& b, const Metadata& m) {
  a.record({ran(m)});
  b.record({ran(m)});
}

const std::vector<bool> kNoneJoined = {false, false};

TEST(CacheCoordinator, OffSendsEverythingInFull) {
  CacheCoordinator c(0);
  const Metadata m = allreduce("a", 4);
  c.record({ran(m)});
  RankMessage mine;
  c.report(m, mine);
  c.set_bits(mine);
  ASSERT_EQ(mine.ready.size(), 1u);
  EXPECT_TRUE(mine.cached_bits.empty());
  EXPECT_TRUE(c.agreed({mine, mine}, kNoneJoined).empty());
}

TEST(CacheCoordinator, CachedNameGoesAsABitAndRunsWhenEveryRankSetIt) {
  CacheCoordinator r0(8), r1(8);
  const Metadata m = allreduce("a", 4);
  cache_on_both(r0, r1, m);
  std::vector<RankMessage> msgs(2);
  r0.report(m, msgs[0]);
  r0.set_bits(msgs[0]);
  EXPECT_TRUE(msgs[0].ready.empty());
  EXPECT_EQ(msgs[0].cached_bits, std::vector<uint8_t>{1});
  // Rank 1 has not submitted it: nothing runs, and it is waiting on rank 1.
  EXPECT_TRUE(r0.agreed(msgs, kNoneJoined).empty());
  const auto waiting = r0.waiting(msgs, kNoneJoined, {0, 5});
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting.at("a"), std::vector<int>{5});  // global rank
  // Next cycle both set it (rank 0 resends its bit).
  std::vector<RankMessage> next(2);
  r0.set_bits(next[0]);
  r1.report(m, next[1]);
  r1.set_bits(next[1]);
  const auto agreed = r0.agreed(next, kNoneJoined);
  ASSERT_EQ(agreed.size(), 1u);
  EXPECT_EQ(agreed[0].names, std::vector<std::string>{"a"});
  EXPECT_EQ(agreed[0].bytes, 16);
  r0.forget("a");
  RankMessage after;
  r0.set_bits(after);
  EXPECT_TRUE(after.cached_bits.empty());
}

TEST(CacheCoordinator, AJoinedRankCountsAsHavingSetEveryBit) {
  CacheCoordinator r0(8), r1(8);
  const Metadata m = allreduce("a", 4);
  cache_on_both(r0, r1, m);
  std::vector<RankMessage> msgs(2);
  r0.report(m, msgs[0]);
  r0.set_bits(msgs[0]);
  EXPECT_EQ(r0.agreed(msgs, {false, true}).size(), 1u);
  EXPECT_TRUE(r0.waiting(msgs, {false, true}, {0, 1}).empty());
}

// A full cache of many names: waiting() names exactly the slots some rank
// set and not every rank, wherever they fall in the bit vectors, and vectors
// of different lengths (a rank whose cache spans fewer slots) count as unset
// past their end.
TEST(CacheCoordinator, WaitingFindsEverySlotSomeRanksSetInAFullCache) {
  constexpr int kNames = 1000;
  CacheCoordinator r0(1024), r1(1024);
  std::vector<Metadata> names;
  for (int i = 0; i < kNames; ++i) names.push_back(allreduce("t" + std::to_string(i), 1));
  for (const Metadata& m : names) cache_on_both(r0, r1, m);
  std::vector<RankMessage> msgs(2);
  for (int i : {0, 7, 8, 500, 998, 999}) r0.report(names[i], msgs[0]);
  for (int i : {7, 501}) r1.report(names[i], msgs[1]);
  r0.set_bits(msgs[0]);
  r1.set_bits(msgs[1]);
  msgs[1].cached_bits.resize(63);  // slots 504 and up: unset on rank 1
  const auto waiting = r0.waiting(msgs, kNoneJoined, {0, 1});
  const std::map<std::string, std::vector<int>> want = {
      {"t0", {1}}, {"t8", {1}}, {"t500", {1}}, {"t501", {0}}, {"t998", {1}}, {"t999", {1}}};
  EXPECT_EQ(waiting, want);  // t7: set by both, it runs
}

TEST(CacheCoordinator, ChangedMetadataGoesInFullAndErasesTheSlot) {
  CacheCoordinator c(8);
  c.record({ran(allreduce("a", 4))});
  RankMessage mine;
  c.report(allreduce("a", 5), mine);
  ASSERT_EQ(mine.ready.size(), 1u);
  EXPECT_EQ(mine.invalidate, std::vector<uint32_t>{0});
  c.agreed({mine}, {false});  // every rank applies the erasure
  EXPECT_FALSE(c.cache().slot_of("a"));
}

TEST(CacheCoordinator, ABitWhoseSlotWasErasedGoesInFull) {
  CacheCoordinator c(8);
  const Metadata m = allreduce("a", 4);
  c.record({ran(m)});
  RankMessage first;
  c.report(m, first);
  RankMessage erase;
  erase.invalidate = {0};
  c.agreed({erase}, {false});
  RankMessage mine;
  c.set_bits(mine);
  ASSERT_EQ(mine.ready.size(), 1u);
  EXPECT_EQ(mine.ready[0].name, "a");
  EXPECT_TRUE(mine.cached_bits.empty());
}

TEST(CacheCoordinator, WithdrawnNameIsNotAgreed) {
  CacheCoordinator r0(8), r1(8);
  const Metadata m = allreduce("a", 4);
  cache_on_both(r0, r1, m);
  std::vector<RankMessage> msgs(2);
  r0.report(m, msgs[0]);
  r0.set_bits(msgs[0]);
  r1.report(m, msgs[1]);
  r1.set_bits(msgs[1]);
  r0.withdraw("a", msgs);
  EXPECT_TRUE(r0.agreed(msgs, kNoneJoined).empty());
}

TEST(CacheCoordinator, GroupsAndErrorsAreNotCached) {
  CacheCoordinator c(8);
  Response group = ran(allreduce("g", 4));
  group.group = true;
  Response failed = ran(allreduce("f", 4));
  failed.error = "mismatch";
  c.record({group, failed});
  EXPECT_EQ(c.cache().size(), 0u);
}

}  // namespace
}  // namespace ringlet::core::runtime
