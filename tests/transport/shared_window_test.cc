// SharedWindow with 3-4 forked local ranks: data visible in place, waits woken
// by doorbells, dead and aborting peers reported, nothing left in /dev/shm.
#include "ringlet/transport/shared_window.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "file_store.h"
#include "job_dir.h"
#include "tests/common/forked_ranks.h"

namespace ringlet::transport::testing {
namespace {

using ringlet::test::expect_all_passed;
using ringlet::test::run_ranks;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr size_t kData = (size_t{1} << 20) + 5;
constexpr int kGlobalBase = 10;  // global rank = 10 + local rank, to catch mix-ups

// The algorithm's part of each segment in these tests: a ready flag, then data.
std::atomic<uint32_t>& flag(SharedWindow& w, int lr) {
  return *reinterpret_cast<std::atomic<uint32_t>*>(w.segment(lr));
}
uint8_t* data(SharedWindow& w, int lr) { return reinterpret_cast<uint8_t*>(w.segment(lr)) + 64; }

class SharedWindowTest : public ::testing::Test {
 protected:
  void TearDown() override {
    auto left = leftover_segments(job_.job_id);
    EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << left.front();
  }

  std::unique_ptr<SharedWindow> open(FileStore& store, int lr, int n,
                                     milliseconds limit = milliseconds(20000)) {
    SharedWindow::Options o;
    o.local_rank = lr;
    o.local_size = n;
    for (int i = 0; i < n; ++i) o.global_ranks.push_back(kGlobalBase + i);
    o.bytes_per_rank = 64 + kData;
    o.job_id = job_.job_id;
    o.store = &store;
    return SharedWindow::create(o, Clock::now() + limit);
  }

  // Survivors meet here before destroying their window, so that none sees
  // another survivor's close before the event under test.
  static void meet(FileStore& store, const std::string& what, int lr, const std::vector<int>& all) {
    store.set("test/" + what + "/" + std::to_string(lr), {1});
    for (int other : all)
      store.get("test/" + what + "/" + std::to_string(other), Clock::now() + seconds(20));
  }

  JobDir job_;
};

TEST_F(SharedWindowTest, EveryRankReadsEveryOtherInPlace) {
  constexpr int n = 4;
  expect_all_passed(run_ranks(n, [&](int lr) {
    FileStore store(job_.dir);
    auto w = open(store, lr, n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w->segment(lr)) % 64, 0u);
    for (size_t i = 0; i < kData; ++i) data(*w, lr)[i] = static_cast<uint8_t>(i * 7 + lr);
    flag(*w, lr).store(1, std::memory_order_release);
    w->ring_all();
    for (int other = 0; other < n; ++other) {
      if (other == lr) continue;
      w->wait_until([&] { return flag(*w, other).load(std::memory_order_acquire) == 1; },
                    kGlobalBase + other, Clock::now() + seconds(20));
      for (size_t i = 0; i < kData; ++i) {
        ASSERT_EQ(data(*w, other)[i], static_cast<uint8_t>(i * 7 + other)) << "byte " << i;
      }
    }
    meet(store, "done", lr, {0, 1, 2, 3});
  }));
}

TEST_F(SharedWindowTest, KilledPeerIsReported) {
  constexpr int n = 3;
  auto exits = run_ranks(n, [&](int lr) {
    FileStore store(job_.dir);
    auto w = open(store, lr, n);
    if (lr == 2) ::raise(SIGKILL);
    auto start = Clock::now();
    try {
      w->wait_until([] { return false; }, kGlobalBase + 2, Clock::now() + seconds(20));
      ADD_FAILURE() << "no PeerLost";
    } catch (const PeerLost& e) {
      EXPECT_EQ(e.peer(), kGlobalBase + 2) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 12"), std::string::npos) << e.what();
      EXPECT_LT(Clock::now() - start, seconds(5));
    }
    meet(store, "seen", lr, {0, 1});
  });
  EXPECT_EQ(exits[0].code, 0);
  EXPECT_EQ(exits[1].code, 0);
  EXPECT_TRUE(exits[2].signaled);
}

TEST_F(SharedWindowTest, AbortStopsEveryoneQuickly) {
  constexpr int n = 3;
  expect_all_passed(run_ranks(n, [&](int lr) {
    FileStore store(job_.dir);
    auto w = open(store, lr, n);
    meet(store, "up", lr, {0, 1, 2});
    if (lr == 1) {
      w->abort(
          ringlet::common::Failure(ringlet::common::FailureKind::kInternal, "injected failure"));
    } else {
      auto start = Clock::now();
      try {
        w->wait_until([] { return false; }, kGlobalBase + 1, Clock::now() + seconds(20));
        ADD_FAILURE() << "no PeerLost";
      } catch (const PeerLost& e) {
        EXPECT_EQ(e.peer(), kGlobalBase + 1) << e.what();
        EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
        EXPECT_LT(Clock::now() - start, seconds(1));
      }
    }
    meet(store, "seen", lr, {0, 1, 2});
  }));
}

// A rank that aborts because it lost a peer passes the loss on: the others
// learn second-hand that the job lost that peer, not merely the aborter.
TEST_F(SharedWindowTest, AbortForALostPeerNamesThatPeer) {
  constexpr int n = 3;
  constexpr int kDead = 42;
  expect_all_passed(run_ranks(n, [&](int lr) {
    FileStore store(job_.dir);
    auto w = open(store, lr, n);
    meet(store, "up", lr, {0, 1, 2});
    if (lr == 1) {
      w->abort(PeerLost(kGlobalBase + 1, kDead, "rank 42 died"));
    } else {
      try {
        w->wait_until([] { return false; }, kGlobalBase + 1, Clock::now() + seconds(20));
        ADD_FAILURE() << "no PeerLost";
      } catch (const PeerLost& e) {
        EXPECT_EQ(e.kind(), ringlet::common::FailureKind::kPeerLost);
        EXPECT_EQ(e.peer(), kDead) << e.what();
        EXPECT_EQ(e.rank(), kGlobalBase + lr) << e.what();
        EXPECT_NE(std::string(e.what()).find("aborted by rank " + std::to_string(kGlobalBase + 1)),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 42 died"), std::string::npos) << e.what();
      }
    }
    meet(store, "seen", lr, {0, 1, 2});
  }));
}

TEST_F(SharedWindowTest, TimeoutNamesTheMissingRankAndCleansUp) {
  FileStore store(job_.dir);
  try {
    open(store, 0, 2, milliseconds(200));
    ADD_FAILURE() << "no Timeout";
  } catch (const Timeout& e) {
    EXPECT_EQ(e.peer(), kGlobalBase + 1);
    EXPECT_NE(std::string(e.what()).find("rank 11"), std::string::npos) << e.what();
  }
}

// SIGTERM during set-up (segment created, peers not there yet): the segment
// registry unlinks it before the default action ends the process.
TEST_F(SharedWindowTest, SigtermDuringSetupLeavesNothing) {
  pid_t pid = ::fork();
  if (pid == 0) {
    FileStore store(job_.dir);
    try {
      open(store, 0, 2, milliseconds(30000));
    } catch (...) {
    }
    ::_exit(3);
  }
  auto deadline = Clock::now() + seconds(20);
  while (leftover_segments(job_.job_id).empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_FALSE(leftover_segments(job_.job_id).empty()) << "the window was never created";
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
}

}  // namespace
}  // namespace ringlet::transport::testing
