// The settings every rank of a job must share: ranks that agree start, and
// when one rank differs every rank fails at start-up with the same error,
// naming the variable, the ranks and their values, instead of running
// different collectives against each other.
#include "core/bootstrap/job_settings.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "core/config.h"
#include "tests/common/forked_ranks.h"

namespace ringlet::core {
namespace {

using namespace std::chrono_literals;
using transport::Clock;

constexpr char kSecret[] = "job-settings-test-secret";

Config config_of(const std::map<std::string, std::string>& env) { return load_config(&env); }

TEST(JobSettings, ValuesAreCanonical) {
  const auto a = job_wide_settings(config_of({{"RINGLET_SHM_WINDOW_BYTES", "16M"},
                                              {"HOROVOD_GPU_OPERATIONS", "ring"},
                                              {"RINGLET_ALGORITHM", "direct"}}));
  const auto b = job_wide_settings(config_of({{"RINGLET_SHM_WINDOW_BYTES", "16777216"},
                                              {"HOROVOD_GPU_OPERATIONS", "RING"},
                                              {"RINGLET_ALGORITHM", "direct"}}));
  EXPECT_EQ(a, b);
  std::map<std::string, std::string> by_name(a.begin(), a.end());
  EXPECT_EQ(by_name.at("HOROVOD_GPU_OPERATIONS"), "RING");
  EXPECT_EQ(by_name.at("RINGLET_ALGORITHM"), "direct");
  EXPECT_EQ(by_name.at("RINGLET_SHM_WINDOW_BYTES"), "16777216");
  EXPECT_EQ(by_name.at("HOROVOD_HIERARCHICAL_ALLREDUCE"), "unset");
  EXPECT_EQ(by_name.at("HOROVOD_HIERARCHICAL_ALLGATHER"), "unset");
  EXPECT_EQ(by_name.size(), 10u);
  // The hierarchical switches as parsed: "true" and "1" are one value.
  const auto on = job_wide_settings(config_of({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "true"},
                                               {"HOROVOD_HIERARCHICAL_ALLGATHER", "0"}}));
  const auto one = job_wide_settings(config_of({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
                                                {"HOROVOD_HIERARCHICAL_ALLGATHER", "false"}}));
  EXPECT_EQ(on, one);
  std::map<std::string, std::string> switches(on.begin(), on.end());
  EXPECT_EQ(switches.at("HOROVOD_HIERARCHICAL_ALLREDUCE"), "1");
  EXPECT_EQ(switches.at("HOROVOD_HIERARCHICAL_ALLGATHER"), "0");
  // Settings a rank may hold on its own are not among them.
  EXPECT_EQ(by_name.count("RINGLET_TIMEOUT_SECONDS"), 0u);
  EXPECT_EQ(by_name.count("HOROVOD_CYCLE_TIME"), 0u);
}

// `ranks` forked ranks check the settings that env_of(rank) gives them;
// each returns whether check(error) holds for what it saw ("" when the
// check passed).
void run_ranks(int ranks, const std::function<std::map<std::string, std::string>(int)>& env_of,
               const std::function<bool(int rank, const std::string& error)>& check) {
  test::ForkedRanks forked(ranks, [&](int rank, uint64_t port) {
    StoreClient store("127.0.0.1:" + std::to_string(port), kSecret, rank, Clock::now() + 10s);
    std::string error;
    try {
      check_job_settings(config_of(env_of(rank)), rank, ranks, store, Clock::now() + 10s);
    } catch (const ConfigError& e) {
      error = e.what();
    }
    if (!check(rank, error)) {
      std::fprintf(stderr, "rank %d saw: %s\n", rank, error.c_str());
      return false;
    }
    return true;
  });
  StoreServer server(0, kSecret);
  forked.start(server.port());
  test::expect_all_passed(forked.wait());
}

TEST(JobSettings, RanksThatAgreeStart) {
  run_ranks(
      3,
      [](int rank) {
        // The same window size, spelt two ways; a timeout of each rank's own.
        return std::map<std::string, std::string>{
            {"RINGLET_SHM_WINDOW_BYTES", rank == 1 ? "8M" : "8388608"},
            {"RINGLET_TIMEOUT_SECONDS", std::to_string(10 + rank)}};
      },
      [](int, const std::string& error) { return error.empty(); });
}

TEST(JobSettings, OneRankThatDiffersFailsEveryRankNamingIt) {
  run_ranks(
      3,
      [](int rank) {
        std::map<std::string, std::string> env{{"HOROVOD_GPU_OPERATIONS", "RING"}};
        if (rank == 2) {
          env["RINGLET_ALGORITHM"] = "ring";
          env["HOROVOD_FUSION_THRESHOLD"] = "0";
        }
        return env;
      },
      [](int, const std::string& error) {
        return error.find("RINGLET_ALGORITHM is auto on rank 0 but ring on rank 2") !=
                   std::string::npos &&
               error.find("HOROVOD_FUSION_THRESHOLD is 134217728 on rank 0 but 0 on rank 2") !=
                   std::string::npos &&
               error.find("HOROVOD_GPU_OPERATIONS") == std::string::npos;
      });
}

// Every rank must pick the same algorithm: a rank that forces (or forbids)
// the hierarchical one where the others leave it to the table fails them all.
TEST(JobSettings, HierarchicalSwitchesMustAgree) {
  run_ranks(
      3,
      [](int rank) {
        std::map<std::string, std::string> env;
        if (rank == 1) env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = "1";
        if (rank == 2) env["HOROVOD_HIERARCHICAL_ALLGATHER"] = "0";
        return env;
      },
      [](int, const std::string& error) {
        return error.find("HOROVOD_HIERARCHICAL_ALLREDUCE is unset on rank 0 but 1 on rank 1") !=
                   std::string::npos &&
               error.find("HOROVOD_HIERARCHICAL_ALLGATHER is unset on rank 0 but 0 on rank 2") !=
                   std::string::npos;
      });
}

TEST(JobSettings, ManyRanksThatDifferAreCounted) {
  run_ranks(
      7,
      [](int rank) {
        return std::map<std::string, std::string>{
            {"HOROVOD_CACHE_CAPACITY", rank == 0 ? "1024" : "0"}};
      },
      [](int, const std::string& error) {
        return error.find("HOROVOD_CACHE_CAPACITY is 1024 on rank 0 but 0 on rank 1") !=
                   std::string::npos &&
               error.find("on rank 4") != std::string::npos &&
               error.find("on rank 5") == std::string::npos &&
               error.find("and 2 more ranks") != std::string::npos;
      });
}

TEST(JobSettings, RankZeroNamesARankThatNeverSendsItsSettings) {
  StoreServer server(0, kSecret);
  StoreClient store("127.0.0.1:" + std::to_string(server.port()), kSecret, 0, Clock::now() + 5s);
  try {
    check_job_settings(Config{}, 0, 2, store, Clock::now() + 200ms);
    FAIL() << "the settings of 2 ranks were checked with 1";
  } catch (const transport::Timeout& e) {
    EXPECT_EQ(e.peer(), 1);
    EXPECT_NE(std::string(e.what()).find("rank 1 did not send its settings"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ringlet::core
