// The process-set table alone: checks, ids that are never reused, and the
// changes the ranks ask for, met in order.
#include "core/runtime/process_set_table.h"

#include <gtest/gtest.h>

#include "core/runtime/runtime_error.h"

namespace ringlet::core::runtime {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(ProcessSetTable, HoldsTheWorldAndChecksRanks) {
  ProcessSetTable t(4, 1);
  EXPECT_EQ(t.ids(), std::vector<int32_t>{0});
  EXPECT_EQ(*t.ranks(0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(t.checked({3, 0}, "add_process_set"), (std::vector<int>{0, 3}));
  EXPECT_EQ(error_of([&] { t.checked({}, "add_process_set"); }),
            "rank 1: add_process_set: a process set needs at least one rank");
  EXPECT_EQ(error_of([&] { t.checked({0, 4}, "add_process_set"); }),
            "rank 1: add_process_set: rank 4 is not a rank of the 4-rank job");
  EXPECT_EQ(error_of([&] { t.checked({2, 0, 2}, "add_process_set"); }),
            "rank 1: add_process_set: rank 2 is listed twice");
}

TEST(ProcessSetTable, StaticSetsTakeIdsInOrderAndMayNotRepeat) {
  ProcessSetTable t(4, 0);
  t.add_static({{2, 0}, {1, 3}});
  EXPECT_EQ(t.ids(), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(*t.ranks(1), (std::vector<int>{0, 2}));
  ProcessSetTable u(4, 0);
  EXPECT_EQ(error_of([&] { u.add_static({{0, 1}, {2}, {1, 0}}); }),
            "rank 0: process sets 1 and 3 both hold ranks [0, 1]");
  EXPECT_EQ(u.ids(), std::vector<int32_t>{0});  // all or nothing
}

TEST(ProcessSetTable, IdsAreNeverReused) {
  ProcessSetTable t(4, 0);
  const int32_t a = t.reserve({0, 1});
  t.add(a, {0, 1});
  EXPECT_EQ(a, 1);
  EXPECT_EQ(error_of([&] { t.reserve({0, 1}); }), "process set 1 already holds ranks [0, 1]");
  EXPECT_EQ(error_of([&] { t.reserve({0, 1, 2, 3}); }),
            "process set 0 already holds ranks [0, 1, 2, 3]");
  const int32_t failed = t.reserve({2, 3});  // building it failed: never added
  EXPECT_EQ(failed, 2);
  t.erase(a);
  EXPECT_FALSE(t.ranks(a));
  const int32_t b = t.reserve({0, 1});
  EXPECT_EQ(b, 3);
  t.add(b, {0, 1});
  EXPECT_EQ(t.ids(), (std::vector<int32_t>{0, 3}));
}

SetChange add(std::vector<int32_t> ranks) {
  SetChange c;
  c.ranks = std::move(ranks);
  return c;
}

TEST(ProcessSetTable, ChangesMeetInOrderOnceEveryRankAsked) {
  ProcessSetTable t(3, 0);
  std::vector<RankMessage> cycle1(3), cycle2(3);
  cycle1[0].set_changes = {add({0, 1}), add({1, 2})};
  cycle1[1].set_changes = {add({0, 1})};
  t.receive(cycle1);
  EXPECT_FALSE(t.next_agreed());  // rank 2 has not asked yet
  cycle2[1].set_changes = {add({1, 2})};
  cycle2[2].set_changes = {add({0, 1}), add({0, 2})};
  t.receive(cycle2);
  auto first = t.next_agreed();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->change, add({0, 1}));
  EXPECT_EQ(first->mismatch, "");
  auto second = t.next_agreed();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->mismatch,
            "Mismatched process set changes: rank 0 called add_process_set([1, 2]), rank 2 called "
            "add_process_set([0, 2]) (every rank must make the same calls in the same order)");
  EXPECT_FALSE(t.next_agreed());
}

TEST(ProcessSetTable, DescribesChanges) {
  SetChange remove;
  remove.remove_id = 4;
  EXPECT_EQ(describe(remove), "remove_process_set(4)");
  EXPECT_EQ(describe(add({0, 3})), "add_process_set([0, 3])");
}

}  // namespace
}  // namespace ringlet::core::runtime
