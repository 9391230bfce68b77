// The finalizer on its own (no device needed): entries end in the order they
// were watched, a poll is asked again until it says done, a poll that throws
// reports its failure, and destruction waits for everything watched.
#include "core/gpu/finalizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringlet::core::gpu {
namespace {

TEST(Finalizer, ReportsEachCollectiveOnceInTheOrderWatched) {
  std::mutex mu;
  std::vector<std::string> ended;
  {
    Finalizer f;
    for (int i = 0; i < 5; ++i) {
      auto turns = std::make_shared<int>(0);
      // Each takes a few looks before it is done; the later ones fewer.
      f.watch([turns, i] { return ++*turns > 5 - i; },
              [&, i](const common::Failure* failure) {
                std::lock_guard lock(mu);
                ended.push_back(std::to_string(i) + (failure ? " failed" : " done"));
              });
    }
  }  // waits for all five
  EXPECT_EQ(ended, (std::vector<std::string>{"0 done", "1 done", "2 done", "3 done", "4 done"}));
}

TEST(Finalizer, AThrowingPollReportsItsFailure) {
  std::mutex mu;
  std::vector<std::string> ended;
  {
    Finalizer f;
    f.watch([]() -> bool {
              throw common::Failure(common::FailureKind::kTimeout, 3, 1, "rank 1 never answered");
            },
            [&](const common::Failure* failure) {
              std::lock_guard lock(mu);
              ASSERT_NE(failure, nullptr);
              EXPECT_EQ(failure->kind(), common::FailureKind::kTimeout);
              ended.push_back(failure->what());
            });
    f.watch([]() -> bool { throw std::runtime_error("cudaEventQuery failed"); },
            [&](const common::Failure* failure) {
              std::lock_guard lock(mu);
              ASSERT_NE(failure, nullptr);
              EXPECT_EQ(failure->kind(), common::FailureKind::kInternal);
              ended.push_back(failure->what());
            });
    f.watch([] { return true; },
            [&](const common::Failure* failure) {
              std::lock_guard lock(mu);
              ended.push_back(failure ? "failed" : "done");
            });
  }
  ASSERT_EQ(ended.size(), 3u);
  EXPECT_NE(ended[0].find("rank 1 never answered"), std::string::npos) << ended[0];
  EXPECT_NE(ended[1].find("cudaEventQuery failed"), std::string::npos) << ended[1];
  EXPECT_EQ(ended[2], "done");
}

TEST(Finalizer, DestroyedIdleItStopsAtOnce) {
  std::atomic<int> calls{0};
  { Finalizer f; }
  {
    Finalizer f;
    f.watch([&] { return ++calls >= 1; }, [](const common::Failure*) {});
  }
  EXPECT_EQ(calls.load(), 1);
}

// What a removed process set used may go once drain() returns: every
// collective watched before has been reported, the one in progress too.
TEST(Finalizer, DrainReturnsOnceEverythingWatchedHasEnded) {
  std::atomic<int> ended{0};
  Finalizer f;
  f.drain();  // idle: at once
  for (int i = 0; i < 3; ++i) {
    auto turns = std::make_shared<int>(0);
    f.watch([turns] { return ++*turns > 200; }, [&](const common::Failure*) { ++ended; });
  }
  f.drain();
  EXPECT_EQ(ended.load(), 3);
  f.watch([] { return true; }, [&](const common::Failure*) { ++ended; });
  f.drain();
  EXPECT_EQ(ended.load(), 4);
}

}  // namespace
}  // namespace ringlet::core::gpu
