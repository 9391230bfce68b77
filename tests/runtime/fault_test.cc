// The runtime fault test: three ranks under ringletrun run steps of
// allreduces through the runtime and rank 2 kills itself. Both survivors must
// fail every pending handle with an error naming rank 2, and ringletrun must
// exit non-zero, within seconds.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/common/job_run.h"

namespace {

// Runs the three ranks; `pending` is what each survivor has in flight when
// rank 2 dies: every one of those handles must fail naming rank 2.
void expect_survivors_fail(const std::string& args, int pending_rank0, int pending_rank1) {
  const ringlet::test::JobRun r = ringlet::test::run_job(
      "RINGLET_TIMEOUT_SECONDS=10 " RINGLETRUN " -np 3 " FAULT_RANK " " + args);
  ASSERT_NE(r.status, -1);
  SCOPED_TRACE(r.output);
  EXPECT_FALSE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  std::istringstream lines(r.output);
  int faults = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("FAULT ");
    if (at == std::string::npos) continue;
    std::istringstream f(line.substr(at + 6));
    int rank = -1, failed = 0;
    f >> rank >> failed;
    std::string message;
    std::getline(f, message);
    EXPECT_TRUE(rank == 0 || rank == 1) << line;
    EXPECT_EQ(failed, rank == 0 ? pending_rank0 : pending_rank1)
        << "every pending handle fails: " << line;
    EXPECT_NE(message.find("rank 2"), std::string::npos) << line;
    ++faults;
  }
  EXPECT_EQ(faults, 2) << "both survivors should report the fault";
  EXPECT_LT(r.seconds, 20.0);
}

}  // namespace

TEST(RuntimeFault, PeerLostFailsHandlesOnSurvivorsNamingIt) { expect_survivors_fail("", 16, 16); }

// Rank 2 dies inside a process set {0, 2}: rank 0 fails its world and set
// handles, rank 1 (outside the set) its world handles.
TEST(RuntimeFault, PeerLostInsideAProcessSet) { expect_survivors_fail("--process-set", 24, 16); }

// Rank 0 writes a timeline and is SIGKILLed mid-run, its writer thread busy:
// the file it leaves is strict JSON (nlohmann and Python's json module read
// it) holding whole events, and the survivor fails naming rank 0.
TEST(RuntimeFault, TimelineOfAKilledRankStillParses) {
  for (int kill_step : {15, 40, 77}) {
    const std::string path = "/tmp/ringlet_killed_timeline_" + std::to_string(::getpid()) + "_" +
                             std::to_string(kill_step) + ".json";
    const ringlet::test::JobRun r =
        ringlet::test::run_job("RINGLET_TIMEOUT_SECONDS=10 " RINGLETRUN " -np 2 " FAULT_RANK
                               " --timeline " + path + " " + std::to_string(kill_step));
    ASSERT_NE(r.status, -1);
    SCOPED_TRACE(r.output);
    EXPECT_FALSE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
    EXPECT_NE(r.output.find("FAULT 1 16"), std::string::npos) << "the survivor fails its handles";
    EXPECT_NE(r.output.find("rank 0"), std::string::npos);

    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json events;
    ASSERT_NO_THROW(events = nlohmann::json::parse(text.str()))
        << "step " << kill_step << ", the file ends: "
        << text.str().substr(text.str().size() > 300 ? text.str().size() - 300 : 0);
    ASSERT_TRUE(events.is_array());
    EXPECT_GT(events.size(), 100u) << "rank 0 ran " << kill_step << " steps of 16 tensors";
    for (const auto& e : events) {
      ASSERT_TRUE(e.is_object());
      EXPECT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("ts")) << e.dump();
    }
    if (std::system("python3 -c 'import json' > /dev/null 2>&1") == 0) {
      const std::string check =
          "python3 -c 'import json, sys; json.load(open(sys.argv[1]))' " + path;
      EXPECT_EQ(std::system(check.c_str()), 0) << "python3's json module refused " << path;
    }
    std::remove(path.c_str());
  }
}
