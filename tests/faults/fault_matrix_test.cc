// The fault matrix: three ranks under ringletrun (fault_rank.cc), one of them
// misbehaving in a different way per test. Every survivor must fail on its
// own, within the deadline, with an error that names the culprit; ringletrun
// must exit non-zero naming the rank that failed first; no shared-memory
// segment of the job and no process of the job may remain.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/job_run.h"

namespace {

struct Expect {
  std::string fault;            // fault_rank's CASE
  std::vector<int> survivors;   // ranks that must report the failure
  std::string culprit;          // what every survivor's message names ("rank 2")
  std::set<std::string> codes;  // the error codes a survivor may report
  std::string first_hand;       // a code at least one survivor reports, if any
  std::string cause;            // another phrase every message holds, if any
  double within = 0;            // seconds from the failing step's start to the error
  std::string launcher;         // what ringletrun's verdict on the first failure holds
  // RINGLET_TIMEOUT_SECONDS and RINGLET_START_TIMEOUT_SECONDS
  int timeout_s = 10;
  int start_timeout_s = 10;
  std::string env;  // more VARIABLE=value settings for every rank, if any
};

// The processes whose command line holds `token`.
std::vector<std::string> processes_holding(const std::string& token) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    // A process may exit while it is read: libstdc++ then throws from the
    // stream buffer (ESRCH), and that process holds nothing any more.
    std::string cmdline;
    try {
      std::ifstream f(e.path() / "cmdline", std::ios::binary);
      cmdline.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    } catch (const std::exception&) {
      continue;
    }
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find(token) != std::string::npos) found.push_back(pid + ": " + cmdline);
  }
  return found;
}

ringlet::test::JobRun run_job(const Expect& x, const std::string& token) {
  // The launcher's grace before it stops the ranks is longer than any
  // survivor may take: each must fail on its own, not be killed.
  return ringlet::test::run_job(
      "RINGLET_ABORT_GRACE_SECONDS=4 RINGLET_TIMEOUT_SECONDS=" + std::to_string(x.timeout_s) +
      " RINGLET_START_TIMEOUT_SECONDS=" + std::to_string(x.start_timeout_s) + " " + x.env +
      " " RINGLETRUN " -np 3 " FAULT_RANK " " + x.fault + " " + token);
}

void check(const Expect& x) {
  const std::string token = "fault-matrix-" + std::to_string(::getpid()) + "-" + x.fault;
  const ringlet::test::JobRun r = run_job(x, token);
  SCOPED_TRACE(r.output);
  ASSERT_NE(r.status, -1);
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0)
      << "ringletrun must exit non-zero, status " << r.status;

  std::istringstream lines(r.output);
  std::set<std::string> jobs;
  std::set<int> reported;
  std::set<std::string> codes_seen;
  bool verdict = false;
  for (std::string line; std::getline(lines, line);) {
    verdict |= line.rfind("ringletrun: rank ", 0) == 0 && line.find(x.launcher) != std::string::npos;
    if (auto at = line.find("JOB "); at != std::string::npos) {
      std::istringstream f(line.substr(at + 4));
      std::string job;
      f >> job;
      if (!job.empty() && job != "RANK") jobs.insert(job);
    }
    const auto at = line.find("FAULT ");
    if (at == std::string::npos) continue;
    std::istringstream f(line.substr(at + 6));
    int rank = -1;
    double seconds = 0;
    f >> rank >> seconds;
    std::string rest;
    std::getline(f, rest);
    const auto colon = rest.find(':');
    const std::string code = rest.substr(1, colon == std::string::npos ? 0 : colon - 1);
    EXPECT_TRUE(std::count(x.survivors.begin(), x.survivors.end(), rank) == 1) << line;
    EXPECT_TRUE(x.codes.count(code) == 1) << "unexpected code '" << code << "': " << line;
    EXPECT_NE(rest.find(x.culprit), std::string::npos) << "should name " << x.culprit << ": " << line;
    if (!x.cause.empty()) {
      EXPECT_NE(rest.find(x.cause), std::string::npos) << line;
    }
    EXPECT_LT(seconds, x.within) << line;
    reported.insert(rank);
    codes_seen.insert(code);
  }
  if (!x.first_hand.empty()) {
    EXPECT_EQ(codes_seen.count(x.first_hand), 1u) << "no survivor reported " << x.first_hand;
  }
  EXPECT_TRUE(verdict) << "ringletrun should name the first failure: " << x.launcher;
  EXPECT_EQ(reported, std::set<int>(x.survivors.begin(), x.survivors.end()))
      << "every survivor must report the fault itself";

  ASSERT_EQ(jobs.size(), 1u) << "the ranks should share one job id";
  const std::string prefix = "ringlet-" + *jobs.begin();
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    EXPECT_NE(e.path().filename().string().rfind(prefix, 0), 0u) << "left behind: " << e.path();
  }
  const auto left = processes_holding(token);
  EXPECT_TRUE(left.empty()) << "still running: " << left.front();
}

Expect killed(const std::string& collective) {
  Expect x;
  x.fault = "kill-" + collective;
  x.survivors = {0, 1};
  x.culprit = "rank 2";
  x.codes = {"peer lost"};
  x.within = 5.0;  // well before the 10 s deadline: a dead peer is seen, not waited out
  x.launcher = "rank 2 was killed by signal 9";
  return x;
}

TEST(FaultMatrix, KilledDuringAllgather) { check(killed("allgather")); }
TEST(FaultMatrix, KilledDuringBroadcast) { check(killed("broadcast")); }
TEST(FaultMatrix, KilledDuringAlltoall) { check(killed("alltoall")); }
// The same through the blocking calls, which run without the runtime.
TEST(FaultMatrix, KilledDuringBlockingAllgather) { check(killed("sync-allgather")); }
TEST(FaultMatrix, KilledDuringBlockingBroadcast) { check(killed("sync-broadcast")); }
TEST(FaultMatrix, KilledDuringBlockingAlltoall) { check(killed("sync-alltoall")); }

// Over TCP a survivor whose own peer is alive learns of the death second-hand:
// its neighbour's links close, or its wait runs out, and the neighbour's
// published reason names the dead rank. That is still a lost peer, not a
// timeout, and it names rank 2, not the neighbour that told it.
TEST(FaultMatrix, KilledDuringAllgatherOverTcp) {
  Expect x = killed("allgather");
  x.env = "RINGLET_TRANSPORT=tcp";
  check(x);
}
TEST(FaultMatrix, KilledDuringBlockingAllgatherOverTcp) {
  Expect x = killed("sync-allgather");
  x.env = "RINGLET_TRANSPORT=tcp";
  check(x);
}

// A rank that ends between collectives: the others' next collective fails
// naming it, whether it shut down first or not.
// Returning from main shuts the library down on the way out (its static
// session ends), which the others learn as a shutdown requested by that rank.
TEST(FaultMatrix, ExitsWithoutShutdown) {
  Expect x = killed("");
  x.fault = "exit";
  x.codes = {"peer lost", "aborted by shutdown"};
  x.launcher = "exited with status 3";
  check(x);
}

TEST(FaultMatrix, ExitsAfterShutdown) {
  Expect x = killed("");
  x.fault = "exit-shutdown";
  x.codes = {"peer lost", "aborted by shutdown"};
  x.launcher = "exited with status 3";
  check(x);
}

// A stopped rank holds its links open: only the deadline can tell. The
// survivor whose deadline fires first aborts the others' wait; they learn
// from its published reason that it timed out, and report a timeout too,
// naming the stopped rank, not the survivor that told them.
TEST(FaultMatrix, StoppedRankTimesOut) {
  Expect x = killed("");
  x.fault = "stop";
  x.codes = {"timeout"};
  x.first_hand = "timeout";
  x.timeout_s = 2;
  x.cause = "timed out after 2 s";
  x.within = 5.0;
  x.launcher = "exited with status 3";
  check(x);
}

// Rank 0 holds the rendezvous store and dies while rank 1 waits in init and
// rank 2 has not arrived: both fail, rank 1 at once, rank 2 by its start
// deadline at the latest.
TEST(FaultMatrix, StoreHolderDiesDuringStartup) {
  Expect x;
  x.fault = "store-dies";
  x.survivors = {1, 2};
  x.culprit = "rank 0";
  x.codes = {"peer lost", "timeout", "configuration error"};
  x.start_timeout_s = 3;
  x.within = 5.0;
  x.launcher = "rank 0 was killed by signal 9";
  check(x);
}

// A rank that never calls init: the others' init fails at the start deadline
// naming it.
TEST(FaultMatrix, RankThatNeverStarts) {
  Expect x;
  x.fault = "never-starts";
  x.survivors = {0, 1};
  x.culprit = "rank 2";
  x.codes = {"timeout"};
  x.start_timeout_s = 2;
  x.within = 4.0;
  x.launcher = "exited with status 3";
  check(x);
}

}  // namespace
