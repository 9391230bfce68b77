// The stall inspector alone, on a clock the test moves: warnings once per
// period, a shutdown once, and the stall timeout failing each stalled name.
#include "core/runtime/stall_inspector.h"

#include <gtest/gtest.h>

namespace ringlet::core::runtime {
namespace {

using std::chrono::seconds;
using Clock = StallInspector::Clock;
using Waiting = std::map<std::string, std::vector<int>>;

const Clock::time_point t0{};

TEST(StallInspector, OffWhenEveryRuleIsZero) {
  StallInspector s({}, 0, t0);
  EXPECT_FALSE(s.active());
  const StallVerdict v = s.inspect({{"a", {1}}}, t0 + seconds(100000));
  EXPECT_EQ(v.warning, "");
  EXPECT_EQ(v.shutdown, "");
  EXPECT_TRUE(v.failed.empty());
}

TEST(StallInspector, WarnsOncePerPeriodNamingRanksAndNames) {
  StallInspector s({.warn_after = seconds(60)}, 0, t0);
  EXPECT_TRUE(s.active());
  const Waiting w = {{"a", {1}}, {"b", {1, 2}}};
  EXPECT_EQ(s.inspect(w, t0).warning, "");  // first seen now
  EXPECT_EQ(s.inspect(w, t0 + seconds(59)).warning, "");
  EXPECT_EQ(s.inspect(w, t0 + seconds(60)).warning,
            "; rank 1 has not submitted 'a', 'b'; rank 2 has not submitted 'b'");
  EXPECT_EQ(s.inspect(w, t0 + seconds(61)).warning, "");  // once per period
  EXPECT_NE(s.inspect(w, t0 + seconds(120)).warning, "");
}

TEST(StallInspector, WarningOnlyForNamesOlderThanThePeriod) {
  StallInspector s({.warn_after = seconds(10)}, 3, t0);
  s.inspect({{"old", {0}}}, t0);
  const std::string w = s.inspect({{"old", {0}}, {"new", {0}}}, t0 + seconds(10)).warning;
  EXPECT_EQ(w, " in process set 3; rank 0 has not submitted 'old'");
}

TEST(StallInspector, ANameThatRanIsForgotten) {
  StallInspector s({.fail_after = seconds(60)}, 0, t0);
  s.inspect({{"a", {1}}}, t0);
  s.inspect({}, t0 + seconds(30));  // ran
  s.inspect({{"a", {1}}}, t0 + seconds(40));  // submitted again: a new wait
  EXPECT_TRUE(s.inspect({{"a", {1}}}, t0 + seconds(90)).failed.empty());
  EXPECT_EQ(s.inspect({{"a", {1}}}, t0 + seconds(100)).failed.size(), 1u);
}

TEST(StallInspector, ShutdownIsDecidedOnce) {
  StallInspector s({.shutdown_after = seconds(5)}, 0, t0);
  const Waiting w = {{"stalled", {1}}};
  s.inspect(w, t0);
  EXPECT_EQ(s.inspect(w, t0 + seconds(4)).shutdown, "");
  EXPECT_EQ(s.inspect(w, t0 + seconds(5)).shutdown,
            "ringlet: stall shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=5): tensors waited "
            "longer than that; rank 1 has not submitted 'stalled'");
  EXPECT_EQ(s.inspect(w, t0 + seconds(50)).shutdown, "");
}

TEST(StallInspector, TimeoutFailsEachStalledNameNamingTheMissingRanks) {
  StallInspector s({.warn_after = seconds(1), .fail_after = seconds(10)}, 0, t0);
  s.inspect({{"a", {1, 2}}}, t0);
  s.inspect({{"a", {1, 2}}, {"b", {2}}}, t0 + seconds(5));
  StallVerdict v = s.inspect({{"a", {1, 2}}, {"b", {2}}}, t0 + seconds(10));
  ASSERT_EQ(v.failed.size(), 1u);
  EXPECT_EQ(v.failed[0].name, "a");
  EXPECT_EQ(v.failed[0].error,
            "ringlet: stall timeout (RINGLET_STALL_TIMEOUT_SECONDS=10): 'a' waited 10 s for "
            "ranks 1, 2, which never submitted it; it failed on every rank that did, and the "
            "runtime goes on (every rank must submit the same names)");
  EXPECT_EQ(v.shutdown, "");  // the timeout alone stops nothing
  // Until every rank has dropped it, "a" is not failed twice.
  EXPECT_TRUE(s.inspect({{"a", {1, 2}}, {"b", {2}}}, t0 + seconds(11)).failed.empty());
  v = s.inspect({{"b", {2}}}, t0 + seconds(15));
  ASSERT_EQ(v.failed.size(), 1u);
  EXPECT_EQ(v.failed[0].name, "b");
  EXPECT_NE(v.failed[0].error.find("for rank 2,"), std::string::npos) << v.failed[0].error;
}

TEST(StallInspector, TimeoutNamesTheProcessSet) {
  StallInspector s({.fail_after = seconds(1)}, 2, t0);
  s.inspect({{"x", {3}}}, t0);
  const StallVerdict v = s.inspect({{"x", {3}}}, t0 + seconds(1));
  ASSERT_EQ(v.failed.size(), 1u);
  EXPECT_NE(v.failed[0].error.find("'x' in process set 2 waited 1 s for rank 3"), std::string::npos)
      << v.failed[0].error;
}

}  // namespace
}  // namespace ringlet::core::runtime
