#include "core/bootstrap/world.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/config.h"
#include "tests/common/forked_ranks.h"

namespace ringlet::core {
namespace {

using namespace std::chrono_literals;
using transport::Clock;

constexpr char kSecret[] = "world-test-secret";

TEST(World, DeriveGroupsByHostInOrderOfLowestRank) {
  // Ranks 0,2 on b; 1,3,4 on a. b holds rank 0, so b is host 0.
  const std::vector<std::string> hosts{"b", "a", "b", "a", "a"};
  const World w = derive_world(3, hosts);
  EXPECT_EQ(w.size, 5);
  EXPECT_EQ(w.cross_size, 2);
  EXPECT_EQ(w.cross_rank, 1);
  EXPECT_EQ(w.local_size, 3);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.host_of, (std::vector<int>{0, 1, 0, 1, 1}));
  EXPECT_EQ(w.ranks_on_host, (std::vector<std::vector<int>>{{0, 2}, {1, 3, 4}}));
  EXPECT_EQ(w.ring, (std::vector<int>{0, 2, 1, 3, 4}));
  EXPECT_FALSE(w.single_host());
  EXPECT_TRUE(derive_world(0, {"x"}).single_host());
}

// Four forked ranks, RINGLET_HOSTNAME faking hosts "left" (ranks 0, 1) and "right" (2, 3).
TEST(World, FourForkedRanksOnTwoFakeHosts) {
  constexpr int kRanks = 4;
  test::ForkedRanks ranks(kRanks, [](int rank, uint16_t port) {
    ::setenv("RINGLET_HOSTNAME", rank < 2 ? "left" : "right", 1);
    LaunchInfo launch;
    launch.launcher = "ringletrun";
    launch.rank = rank;
    launch.size = kRanks;
    launch.local_rank = rank % 2;
    launch.local_size = 2;
    // Each rank drew its own id (as under a launcher that names no job):
    // all must end with rank 0's.
    launch.job_id = rank == 0 ? "worldtest" : "own-" + std::to_string(rank);
    StoreClient store("127.0.0.1:" + std::to_string(port), kSecret, rank, Clock::now() + 10s);
    const World w = build_world(launch, store, Clock::now() + 10s);
    const bool ok = w.rank == rank && w.size == kRanks && w.local_rank == rank % 2 &&
                    w.local_size == 2 && w.cross_rank == rank / 2 && w.cross_size == 2 &&
                    w.job_id == "worldtest" && w.ring == std::vector<int>{0, 1, 2, 3} &&
                    w.hostnames == std::vector<std::string>{"left", "left", "right", "right"};
    if (!ok) std::fprintf(stderr, "rank %d: unexpected world\n", rank);
    return ok;
  });
  StoreServer server(0, kSecret);
  ranks.start(server.port());
  test::expect_all_passed(ranks.wait());
}

TEST(World, DisagreeingLauncherHintNamesTheVariable) {
  constexpr int kRanks = 2;
  test::ForkedRanks ranks(kRanks, [](int rank, uint16_t port) {
    ::setenv("RINGLET_HOSTNAME", "same", 1);
    LaunchInfo launch;
    launch.launcher = "mpirun";
    launch.rank = rank;
    launch.size = kRanks;
    launch.local_size = 1;  // wrong: both ranks are on "same"
    StoreClient store("127.0.0.1:" + std::to_string(port), kSecret, rank, Clock::now() + 10s);
    try {
      build_world(launch, store, Clock::now() + 10s);
    } catch (const ConfigError& e) {
      return std::string(e.what()).find("OMPI_COMM_WORLD_LOCAL_SIZE=1") != std::string::npos;
    }
    return false;
  });
  StoreServer server(0, kSecret);
  ranks.start(server.port());
  test::expect_all_passed(ranks.wait());
}

TEST(World, RankZeroNamesTheMissingRank) {
  StoreServer server(0, kSecret);
  StoreClient store("127.0.0.1:" + std::to_string(server.port()), kSecret, 0, Clock::now() + 5s);
  LaunchInfo launch;
  launch.rank = 0;
  launch.size = 2;
  try {
    build_world(launch, store, Clock::now() + 200ms);
    FAIL() << "a world of 2 formed with 1";
  } catch (const transport::Timeout& e) {
    EXPECT_EQ(e.peer(), 1);
    EXPECT_NE(std::string(e.what()).find("rank 1 did not join"), std::string::npos) << e.what();
  }
}

TEST(World, OtherRanksSayHowManyJoined) {
  StoreServer server(0, kSecret);
  StoreClient store("127.0.0.1:" + std::to_string(server.port()), kSecret, 2, Clock::now() + 5s);
  LaunchInfo launch;
  launch.rank = 2;
  launch.size = 3;
  try {
    build_world(launch, store, Clock::now() + 200ms);
    FAIL() << "a world of 3 formed with 1";
  } catch (const transport::Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2: the world did not form in time: 1 of 3"),
              std::string::npos)
        << e.what();
  }
}

// Rank 0's list of hosts that does not fit the world is rank 0 breaking the
// protocol: a transport failure naming it.
TEST(World, AMalformedHostListIsATransportFailureNamingRankZero) {
  StoreServer server(0, kSecret);
  StoreClient store("127.0.0.1:" + std::to_string(server.port()), kSecret, 1, Clock::now() + 5s);
  store.set("world/hosts", {'a', '\n'});
  LaunchInfo launch;
  launch.rank = 1;
  launch.size = 3;
  try {
    build_world(launch, store, Clock::now() + 5s);
    FAIL() << "a world of 3 formed from one host name";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kTransport) << e.what();
    EXPECT_EQ(e.rank(), 1) << e.what();
    EXPECT_EQ(e.peer(), 0) << e.what();
    EXPECT_EQ(std::string(e.what()), "rank 1: rank 0 published 1 hostnames for a world of 3");
  }
}

// Locality orders a host's ranks (each host's still together, in order);
// without it a host's ranks ascend.
TEST(World, LocalityOrdersTheRingWithinEachHost) {
  const std::vector<std::string> hosts{"a", "a", "a", "a", "b", "b", "b", "b"};
  EXPECT_EQ(derive_world(0, hosts).ring, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  const World w = derive_world(5, hosts, {0, 1, 0, 1, 1, 0, 1, 0});
  EXPECT_EQ(w.ring, (std::vector<int>{0, 2, 1, 3, 5, 7, 4, 6}));
  EXPECT_EQ(w.locality, (std::vector<int>{0, 1, 0, 1, 1, 0, 1, 0}));
  EXPECT_EQ(w.local_rank, 1);  // local ranks stay by rank: the ring alone moves
}

// Four forked ranks on one host, on NUMA nodes 0, 1, 0, 1: every rank ends
// with the same ring, each node's ranks together.
TEST(World, ExchangedLocalityGivesEveryRankTheSameRing) {
  constexpr int kRanks = 4;
  test::ForkedRanks ranks(kRanks, [](int rank, uint16_t port) {
    ::setenv("RINGLET_HOSTNAME", "one", 1);
    LaunchInfo launch;
    launch.rank = rank;
    launch.size = kRanks;
    launch.job_id = "localitytest";
    StoreClient store("127.0.0.1:" + std::to_string(port), kSecret, rank, Clock::now() + 10s);
    World w = build_world(launch, store, Clock::now() + 10s);
    exchange_locality(w, rank % 2, store, Clock::now() + 10s);
    const bool ok =
        w.ring == std::vector<int>{0, 2, 1, 3} && w.locality == std::vector<int>{0, 1, 0, 1};
    if (!ok) std::fprintf(stderr, "rank %d: unexpected ring\n", rank);
    return ok;
  });
  StoreServer server(0, kSecret);
  ranks.start(server.port());
  test::expect_all_passed(ranks.wait());
}

TEST(World, ALocalityNotToldNamesTheRank) {
  StoreServer server(0, kSecret);
  StoreClient store("127.0.0.1:" + std::to_string(server.port()), kSecret, 0, Clock::now() + 5s);
  World w = derive_world(0, {"a", "a"});
  try {
    exchange_locality(w, 0, store, Clock::now() + 200ms);
    FAIL() << "rank 1's locality came from nowhere";
  } catch (const transport::Timeout& e) {
    EXPECT_EQ(e.peer(), 1);
    EXPECT_NE(std::string(e.what()).find("rank 1 did not tell where it runs in time"),
              std::string::npos)
        << e.what();
  }
  // A published list that does not fit the world is rank 0 breaking the protocol.
  StoreClient other("127.0.0.1:" + std::to_string(server.port()), kSecret, 1, Clock::now() + 5s);
  other.set("world/localities", {'0', '\n'});
  World w1 = derive_world(1, {"a", "a"});
  try {
    exchange_locality(w1, 0, other, Clock::now() + 5s);
    FAIL() << "a ring of 2 from one locality";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kTransport) << e.what();
    EXPECT_EQ(std::string(e.what()), "rank 1: rank 0 published 1 localities for a world of 2");
  }
}

}  // namespace
}  // namespace ringlet::core
