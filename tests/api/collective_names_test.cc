// The ringlet torch.distributed backend's names for its collectives
// (api/python/torch_c10d/collective_names.h), without torch: the period a
// group's calls repeat with, the window of names it gives, and a slot reused
// only once its collective is done; on a one-rank Ringlet, since the window
// is agreed through an allgather.
#include "torch_c10d/collective_names.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "ringlet/ringlet.h"

namespace {

using ringlet::torch_c10d::CollectiveNames;

std::vector<uint64_t> repeated(const std::vector<uint64_t>& step, size_t calls) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < calls; ++i) out.push_back(step[i % step.size()]);
  return out;
}

TEST(CollectiveNames, PeriodIsTheShortestRepeatOverTheWholeHistory) {
  EXPECT_EQ(CollectiveNames::period_of(repeated({7}, 32)), 1u);
  EXPECT_EQ(CollectiveNames::period_of(repeated({1, 2, 3}, 32)), 3u);
  EXPECT_EQ(CollectiveNames::period_of(repeated({1, 2, 1, 3}, 64)), 4u);  // not 2
  // A step of 200 calls, seen 2.5 times.
  std::vector<uint64_t> step;
  for (uint64_t i = 0; i < 200; ++i) step.push_back(i * 31 + 5);
  EXPECT_EQ(CollectiveNames::period_of(repeated(step, 500)), 200u);
  // Seen less than twice, or broken once: no period.
  EXPECT_EQ(CollectiveNames::period_of(repeated(step, 300)), 0u);
  std::vector<uint64_t> broken = repeated({1, 2, 3}, 60);
  broken[40] = 9;
  EXPECT_EQ(CollectiveNames::period_of(broken), 0u);
  EXPECT_EQ(CollectiveNames::period_of({}), 0u);
}

TEST(CollectiveNames, WindowIsAMultipleOfThePeriodAtLeastTheDefault) {
  EXPECT_EQ(CollectiveNames::window_for(0), CollectiveNames::kDefaultWindow);
  EXPECT_EQ(CollectiveNames::window_for(1), 64u);
  EXPECT_EQ(CollectiveNames::window_for(3), 66u);
  EXPECT_EQ(CollectiveNames::window_for(64), 64u);
  EXPECT_EQ(CollectiveNames::window_for(200), 200u);
  for (uint64_t p = 1; p <= CollectiveNames::kLongestPeriod; ++p) {
    EXPECT_EQ(CollectiveNames::window_for(p) % p, 0u) << p;
    EXPECT_GE(CollectiveNames::window_for(p), CollectiveNames::kDefaultWindow) << p;
  }
  EXPECT_TRUE(CollectiveNames::agreement_point(32));
  EXPECT_TRUE(CollectiveNames::agreement_point(8192));
  EXPECT_FALSE(CollectiveNames::agreement_point(0));
  EXPECT_FALSE(CollectiveNames::agreement_point(33));
}

class CollectiveNamesOnARank : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"RINGLET_RANK", "RINGLET_SIZE", "RINGLET_RENDEZVOUS",
                             "OMPI_COMM_WORLD_RANK", "PMI_RANK"})
      unsetenv(name);
    ringlet::init_with_runtime();
  }
  void TearDown() override { ringlet::shutdown(); }
};

TEST_F(CollectiveNamesOnARank, NamesRepeatWithTheAgreedPeriod) {
  CollectiveNames names("g", 0);
  std::vector<std::string> given;
  for (uint64_t i = 0; i < 200; ++i) {
    CollectiveNames::Taken t = names.take(100 + i % 3, "all_reduce");
    EXPECT_EQ(t.sequence, i);
    given.push_back(t.name);
  }
  EXPECT_EQ(given[0], "torch.g.0.all_reduce");
  EXPECT_EQ(given[63], "torch.g.63.all_reduce");
  EXPECT_EQ(given[64], "torch.g.64.all_reduce");  // agreed at 32: period 3, window 66
  EXPECT_EQ(given[66], "torch.g.0.all_reduce");
  EXPECT_EQ(names.window(), 66u);
  for (size_t i = 66; i < given.size(); ++i) EXPECT_EQ(given[i], given[i - 66]) << i;
}

TEST_F(CollectiveNamesOnARank, ASlotStillHeldIsWaitedFor) {
  CollectiveNames names("g", 0);
  CollectiveNames::Taken first = names.take(1, "all_reduce");
  std::vector<CollectiveNames::Taken> others;
  for (int i = 1; i < 64; ++i) others.push_back(names.take(1, "all_reduce"));
  std::atomic<bool> released{false};
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    released = true;
    first.lease.reset();  // the first collective is done
  });
  CollectiveNames::Taken again = names.take(1, "all_reduce");  // slot 0 again
  EXPECT_TRUE(released.load()) << "slot 0 was given again while still held";
  EXPECT_EQ(again.name, first.name);
  later.join();
}

}  // namespace
