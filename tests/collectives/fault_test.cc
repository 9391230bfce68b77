// The fault test: three ranks under ringletrun loop allreduce and rank 2 kills
// itself. Ranks 0 and 1 must fail with a message naming rank 2 well before
// the 10 s deadline, ringletrun must exit non-zero, and no shared-memory
// segment of the job may remain. Once through the window (direct), once
// over TCP (ring), in builds with UCX once over UCX (ring); and as two hosts
// of two ranks through the hierarchical allreduce (rank 2's host window, the
// links between the hosts), where ranks 0, 1 and 3 survive.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "tests/common/job_run.h"

namespace {

// "hierarchical" runs 4 ranks as two hosts with HOROVOD_HIERARCHICAL_ALLREDUCE=1.
ringlet::test::JobRun run_job(const std::string& algorithm, const std::string& transport,
                              int timeout_s, const std::string& mode) {
  const bool layered = algorithm == "hierarchical";
  return ringlet::test::run_job(
      "RINGLET_TIMEOUT_SECONDS=" + std::to_string(timeout_s) +
      (layered ? " HOROVOD_HIERARCHICAL_ALLREDUCE=1 RINGLET_ALGORITHM=auto"
               : " RINGLET_ALGORITHM=" + algorithm) +
      " RINGLET_TRANSPORT=" + transport + " " RINGLETRUN +
      (layered ? " -np 4 " TWO_HOSTS " " : " -np 3 ") + FAULT_RANK " " + mode);
}

// mode "kill": rank 2 dies, survivors must notice long before the 10 s
// deadline. mode "hang": rank 2 goes silent, survivors must time out after
// the 2 s deadline, naming it.
void check(const std::string& algorithm, const std::string& transport, const std::string& mode) {
  const bool hang = mode == "hang";
  const bool layered = algorithm == "hierarchical";
  const ringlet::test::JobRun r = run_job(algorithm, transport, hang ? 2 : 10, mode);
  SCOPED_TRACE(r.output);
  ASSERT_NE(r.status, -1);
  EXPECT_FALSE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << "ringletrun exited 0";
  std::istringstream lines(r.output);
  std::string line, job;
  int faults = 0;
  while (std::getline(lines, line)) {
    if (auto at = line.find("JOB "); at != std::string::npos) job = line.substr(at + 4);
    const auto at = line.find("FAULT ");
    if (at == std::string::npos) continue;
    std::istringstream f(line.substr(at + 6));
    int rank = -1;
    double seconds = 0;
    f >> rank >> seconds;
    std::string message;
    std::getline(f, message);
    EXPECT_TRUE(rank == 0 || rank == 1 || (layered && rank == 3)) << line;
    EXPECT_NE(message.find("rank 2"), std::string::npos) << line;
    if (hang) {
      EXPECT_NE(message.find("timed out after 2 s"), std::string::npos) << line;
    }
    EXPECT_LT(seconds, hang ? 5.0 : 2.0) << line;
    ++faults;
  }
  EXPECT_EQ(faults, layered ? 3 : 2) << "every survivor should report the fault";
  EXPECT_LT(r.seconds, 20.0);
  ASSERT_FALSE(job.empty());
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    EXPECT_EQ(e.path().filename().string().find("ringlet-" + job), std::string::npos)
        << "left behind: " << e.path();
  }
}

TEST(Fault, DirectThroughWindow) { check("direct", "shm", "kill"); }
TEST(Fault, RingOverTcp) { check("ring", "tcp", "kill"); }
TEST(Fault, TimeoutThroughWindow) { check("direct", "shm", "hang"); }
TEST(Fault, TimeoutRingOverTcp) { check("ring", "tcp", "hang"); }
TEST(Fault, HierarchicalAcrossTwoHosts) { check("hierarchical", "auto", "kill"); }
TEST(Fault, TimeoutHierarchicalAcrossTwoHosts) { check("hierarchical", "auto", "hang"); }
#if RINGLET_TEST_UCX
TEST(Fault, RingOverUcx) { check("ring", "ucx", "kill"); }
TEST(Fault, TimeoutRingOverUcx) { check("ring", "ucx", "hang"); }
#endif

}  // namespace
