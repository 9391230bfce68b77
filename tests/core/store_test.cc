#include "core/bootstrap/store.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <optional>
#include <thread>

#include "tests/common/forked_ranks.h"

namespace ringlet::core {
namespace {

using namespace std::chrono_literals;
using transport::Clock;

constexpr const char* kSecret = "0123456789abcdef0123456789abcdef";

std::string at(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

TEST(Store, SetGetAdd) {
  StoreServer server(0, kSecret);
  ASSERT_NE(server.port(), 0);
  StoreClient c(at(server.port()), kSecret, 0, Clock::now() + 5s);
  c.set("a", bytes("hello"));
  EXPECT_EQ(text(c.get("a", Clock::now() + 5s)), "hello");
  c.set("a", bytes("again"));
  EXPECT_EQ(text(c.get("a", Clock::now() + 5s)), "again");
  c.set("empty", {});
  EXPECT_TRUE(c.get("empty", Clock::now() + 5s).empty());
  EXPECT_EQ(c.add("n", 5), 5);
  EXPECT_EQ(c.add("n", -2), 3);
  EXPECT_EQ(text(c.get("n", Clock::now() + 5s)), "3");
  std::vector<uint8_t> big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  c.set("big", big);
  EXPECT_EQ(c.get("big", Clock::now() + 5s), big);
  EXPECT_EQ(server.refused(), 0u);
}

TEST(Store, TryGetDoesNotWait) {
  StoreServer server(0, kSecret);
  StoreClient c(at(server.port()), kSecret, 0, Clock::now() + 5s);
  const auto start = Clock::now();
  EXPECT_FALSE(c.try_get("absent"));
  EXPECT_LT(Clock::now() - start, 1s);
  c.set("present", bytes("v"));
  EXPECT_EQ(c.try_get("present"), bytes("v"));
  c.set("blank", {});
  ASSERT_TRUE(c.try_get("blank"));
  EXPECT_TRUE(c.try_get("blank")->empty());
}

TEST(Store, AddToTextIsAnErrorNotARefusal) {
  StoreServer server(0, kSecret);
  StoreClient c(at(server.port()), kSecret, 2, Clock::now() + 5s);
  c.set("word", bytes("hello"));
  try {
    c.add("word", 1);
    FAIL() << "add to a non-integer succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'word'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.add("count", 1), 1);  // the connection still works
  EXPECT_EQ(server.refused(), 0u);
}

TEST(Store, AddThatOverflowsIsAnErrorAndKeepsTheValue) {
  StoreServer server(0, kSecret);
  StoreClient c(at(server.port()), kSecret, 2, Clock::now() + 5s);
  EXPECT_EQ(c.add("n", INT64_MAX), INT64_MAX);
  try {
    c.add("n", 1);
    FAIL() << "an add past INT64_MAX succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.add("n", 0), INT64_MAX);
  EXPECT_EQ(server.refused(), 0u);
}

TEST(Store, GetWaitsForALaterSet) {
  StoreServer server(0, kSecret);
  StoreClient reader(at(server.port()), kSecret, 1, Clock::now() + 5s);
  std::jthread writer([port = server.port()] {
    StoreClient w(at(port), kSecret, 0, Clock::now() + 5s);
    std::this_thread::sleep_for(200ms);
    w.set("late", bytes("value"));
  });
  const auto start = Clock::now();
  EXPECT_EQ(text(reader.get("late", Clock::now() + 10s)), "value");
  EXPECT_GE(Clock::now() - start, 150ms);
}

TEST(Store, GetTimeoutNamesTheKeyAndTheStore) {
  StoreServer server(0, kSecret);
  StoreClient c(at(server.port()), kSecret, 3, Clock::now() + 5s);
  try {
    c.get("never/set", Clock::now() + 200ms);
    FAIL() << "get returned";
  } catch (const transport::Timeout& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'never/set'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(at(server.port())), std::string::npos) << msg;
  }
  // The client reconnects after a timeout and keeps working.
  c.set("k", bytes("v"));
  EXPECT_EQ(text(c.get("k", Clock::now() + 5s)), "v");
}

TEST(Store, ClientWaitsForAServerThatStartsLater) {
  uint16_t port = 0;
  {
    StoreServer probe(0, kSecret);  // find a free port, then free it
    port = probe.port();
  }
  std::unique_ptr<StoreServer> server;
  std::jthread starter([&] {
    std::this_thread::sleep_for(300ms);
    server = std::make_unique<StoreServer>(port, kSecret);
  });
  StoreClient c(at(port), kSecret, 1, Clock::now() + 10s);
  starter.join();
  c.set("x", bytes("y"));
  EXPECT_EQ(text(c.get("x", Clock::now() + 5s)), "y");
}

TEST(Store, ConnectTimeoutNamesTheAddress) {
  uint16_t port = 0;
  {
    StoreServer probe(0, kSecret);
    port = probe.port();
  }
  try {
    StoreClient c(at(port), kSecret, 4, Clock::now() + 300ms);
    FAIL() << "connected to nothing";
  } catch (const transport::Timeout& e) {
    EXPECT_NE(std::string(e.what()).find(at(port)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 4"), std::string::npos) << e.what();
  }
}

// The interrupt is asked while a call waits, and ends the wait at once
// (kShutdown), whether the store is not up yet or has not answered.
TEST(Store, AnInterruptEndsTheWaitsWithinASlice) {
  uint16_t port = 0;
  {
    StoreServer probe(0, kSecret);
    port = probe.port();
  }
  int asked = 0;
  auto after_three = [&asked] { return ++asked > 3; };
  const auto start = Clock::now();
  try {
    StoreClient c(at(port), kSecret, 2, Clock::now() + 30s, after_three);
    FAIL() << "connected to nothing";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kShutdown) << e.what();
    EXPECT_NE(std::string(e.what()).find("interrupted while waiting for a connection to"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(asked, 4);

  StoreServer server(0, kSecret);
  asked = 0;
  StoreClient c(at(server.port()), kSecret, 2, Clock::now() + 5s, after_three);
  const auto waiting = Clock::now();
  try {
    c.get("never", Clock::now() + 30s);
    FAIL() << "got a key nobody set";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kShutdown) << e.what();
    EXPECT_NE(std::string(e.what()).find("key 'never'"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - waiting, 5s);
  // Without it, the client goes on as before, on a fresh connection.
  c.set_interrupt({});
  c.set("k", bytes("v"));
  EXPECT_EQ(text(c.get("k", Clock::now() + 5s)), "v");
}

// Once a client has changed the store, the others count it in: an interrupt
// then abandons that rendezvous for this process, and a later client of it
// (same address, same secret) is refused at once rather than joining twice.
// Another job's rendezvous, and the store's own data, are untouched.
TEST(Store, AnInterruptAfterJoiningAbandonsThatRendezvous) {
  StoreServer server(0, kSecret);
  int asked = 0;
  StoreClient c(at(server.port()), kSecret, 3, Clock::now() + 5s, [&asked] { return ++asked > 3; });
  c.add("world/joined", 1);
  try {
    c.get("world/hosts", Clock::now() + 30s);
    FAIL() << "got a key nobody set";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kShutdown) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("key 'world/hosts'"), std::string::npos) << what;
    EXPECT_NE(what.find("after this rank had joined the rendezvous at " + at(server.port())),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("the job must be started again"), std::string::npos) << what;
  }

  const auto start = Clock::now();
  try {
    StoreClient again(at(server.port()), kSecret, 3, Clock::now() + 30s);
    FAIL() << "joined an abandoned rendezvous again";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kShutdown) << e.what();
    EXPECT_EQ(e.rank(), 3) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("an earlier init of this process was interrupted after this rank had "
                        "joined the rendezvous at " +
                        at(server.port())),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("the job must be started again"), std::string::npos) << what;
  }
  EXPECT_LT(Clock::now() - start, 1s);

  // Another secret is another job at the same address: it is not refused here.
  EXPECT_NO_THROW(StoreClient(at(server.port()), "another job's secret", 0, Clock::now() + 5s));
}

TEST(Store, AnInterruptBeforeChangingTheStoreLeavesItJoinable) {
  StoreServer server(0, kSecret);
  int asked = 0;
  StoreClient c(at(server.port()), kSecret, 5, Clock::now() + 5s, [&asked] { return ++asked > 3; });
  EXPECT_THROW(c.get("world/hosts", Clock::now() + 30s), common::Failure);
  StoreClient again(at(server.port()), kSecret, 5, Clock::now() + 5s);
  EXPECT_EQ(again.add("world/joined", 1), 1);
}

TEST(Store, ServerDeathIsReported) {
  auto server = std::make_unique<StoreServer>(0, kSecret);
  const uint16_t port = server->port();
  StoreClient c(at(port), kSecret, 1, Clock::now() + 5s);
  // One request first: until a connection has met its store, a closed one is
  // retried as a store not up yet (or a retired one), whatever the timing.
  c.set("up", bytes("1"));
  std::jthread killer([&] {
    std::this_thread::sleep_for(200ms);
    server.reset();
  });
  try {
    c.get("missing", Clock::now() + 10s);
    FAIL() << "get returned";
  } catch (const transport::Timeout& e) {
    FAIL() << "timed out instead of noticing the server's death: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lost the rendezvous store at " + at(port) + " (rank 0)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Store, ThreadsBarrierAndCounters) {
  StoreServer server(0, kSecret);
  constexpr int kRanks = 8;
  std::vector<std::jthread> threads;
  std::atomic<int> failures{0};
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      try {
        StoreClient c(at(server.port()), kSecret, r, Clock::now() + 10s);
        c.set("t/" + std::to_string(r), bytes(std::to_string(r * r)));
        for (int i = 0; i < 10; ++i) c.add("t/count", 1);
        c.barrier("one", kRanks, Clock::now() + 10s);
        if (c.add("t/count", 0) != kRanks * 10) ++failures;
        for (int p = 0; p < kRanks; ++p) {
          if (text(c.get("t/" + std::to_string(p), Clock::now() + 10s)) != std::to_string(p * p)) {
            ++failures;
          }
        }
        c.barrier("two", kRanks, Clock::now() + 10s);
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  }
  threads.clear();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Store, BarrierTimeoutSaysHowManyArrived) {
  StoreServer server(0, kSecret);
  StoreClient c(at(server.port()), kSecret, 0, Clock::now() + 5s);
  try {
    c.barrier("lonely", 3, Clock::now() + 200ms);
    FAIL() << "barrier of 3 passed with 1";
  } catch (const transport::Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("1 of 3"), std::string::npos) << e.what();
  }
}

TEST(Store, AWillIsSetWhenItsClientCloses) {
  StoreServer server(0, kSecret);
  StoreClient reader(at(server.port()), kSecret, 0, Clock::now() + 5s);
  std::vector<uint8_t> seen;
  std::thread waiter([&] { seen = reader.get("gone/1", Clock::now() + 10s); });
  {
    StoreClient leaver(at(server.port()), kSecret, 1, Clock::now() + 5s);
    leaver.set_will("gone/1", bytes("first"));
    leaver.set_will("gone/1", bytes("rank 1 left"));  // the last one counts
    leaver.set("other", bytes("x"));
    std::this_thread::sleep_for(50ms);
    StoreClient looker(at(server.port()), kSecret, 2, Clock::now() + 5s);
    EXPECT_FALSE(looker.try_get("gone/1")) << "a will waits for its connection to close";
  }
  waiter.join();  // woken by the will, as by a set
  EXPECT_EQ(text(seen), "rank 1 left");
  EXPECT_EQ(server.refused(), 0u);
}

TEST(Store, AWillDoesNotReplaceAValueSetBeforeTheClose) {
  StoreServer server(0, kSecret);
  {
    StoreClient leaver(at(server.port()), kSecret, 2, Clock::now() + 5s);
    leaver.set_will("why/2", bytes("left without a word"));
    leaver.set("why/2", bytes("its own reason"));
  }
  StoreClient reader(at(server.port()), kSecret, 0, Clock::now() + 5s);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(text(reader.get("why/2", Clock::now() + 5s)), "its own reason");
}

TEST(Store, AClientThatDropsItsConnectionTakesItsWillAlong) {
  StoreServer server(0, kSecret);
  std::optional<StoreClient> c(std::in_place, at(server.port()), kSecret, 3, Clock::now() + 5s);
  c->set_will("gone/3", bytes("rank 3 left"));
  // A wait that times out drops the connection: the client lives on, so its
  // will must not fire; it goes with the next connection instead.
  EXPECT_THROW(c->get("never/set", Clock::now() + 100ms), transport::Timeout);
  c->set("after", bytes("v"));
  std::this_thread::sleep_for(100ms);
  StoreClient reader(at(server.port()), kSecret, 0, Clock::now() + 5s);
  EXPECT_FALSE(reader.try_get("gone/3"));
  c.reset();  // the client's end: now the will fires
  EXPECT_EQ(text(reader.get("gone/3", Clock::now() + 5s)), "rank 3 left");
}

TEST(Store, AKilledProcessLeavesItsWill) {
  test::ForkedRanks ranks(1, [](int, uint16_t port) {
    StoreClient c(at(port), kSecret, 1, Clock::now() + 10s);
    c.set_will("gone/1", bytes("rank 1 ended"));
    c.set("ready", bytes("1"));
    ::raise(SIGKILL);
    return true;
  });
  StoreServer server(0, kSecret);
  ranks.start(server.port());
  StoreClient reader(at(server.port()), kSecret, 0, Clock::now() + 5s);
  EXPECT_EQ(text(reader.get("gone/1", Clock::now() + 10s)), "rank 1 ended");
  const auto exits = ranks.wait();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].signaled && exits[0].code == SIGKILL);
}

TEST(Store, ForkedProcesses) {
  constexpr int kRanks = 4;
  test::ForkedRanks ranks(kRanks, [](int rank, uint16_t port) {
    StoreClient c(at(port), kSecret, rank, Clock::now() + 10s);
    c.set("p/" + std::to_string(rank), bytes("rank" + std::to_string(rank)));
    c.add("p/count", rank + 1);
    c.barrier("forked", kRanks, Clock::now() + 10s);
    for (int p = 0; p < kRanks; ++p) {
      if (text(c.get("p/" + std::to_string(p), Clock::now() + 10s)) != "rank" + std::to_string(p)) {
        return false;
      }
    }
    return c.add("p/count", 0) == 1 + 2 + 3 + 4;
  });
  StoreServer server(0, kSecret);
  ranks.start(server.port());
  test::expect_all_passed(ranks.wait());
  EXPECT_EQ(server.refused(), 0u);
}

}  // namespace
}  // namespace ringlet::core
