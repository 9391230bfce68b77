// The runtime fault test: three ranks under ringletrun run steps of
// allreduces through the runtime and rank 2 kills itself. Both survivors must
// fail every pending handle with an error naming rank 2, and ringletrun must
// exit non-zero, within seconds.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>

namespace {

// Runs the three ranks; `pending` is what each survivor has in flight when
// rank 2 dies: every one of those handles must fail naming rank 2.
void expect_survivors_fail(const std::string& args, int pending_rank0, int pending_rank1) {
  const std::string cmd =
      "RINGLET_TIMEOUT_SECONDS=10 " RINGLETRUN " -np 3 " FAULT_RANK " " + args + " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) output += buf;
  const int status = ::pclose(p);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  SCOPED_TRACE(output);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::istringstream lines(output);
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
  EXPECT_LT(seconds, 20.0);
}

}  // namespace

TEST(RuntimeFault, PeerLostFailsHandlesOnSurvivorsNamingIt) { expect_survivors_fail("", 16, 16); }

// Rank 2 dies inside a process set {0, 2}: rank 0 fails its world and set
// handles, rank 1 (outside the set) its world handles.
TEST(RuntimeFault, PeerLostInsideAProcessSet) { expect_survivors_fail("--process-set", 24, 16); }
