// The runtime fault test: three ranks under ringletrun run steps of
// allreduces through the runtime and rank 2 kills itself. Both survivors must
// fail every pending handle with an error naming rank 2, and ringletrun must
// exit non-zero, within seconds.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <sys/wait.h>

TEST(RuntimeFault, PeerLostFailsHandlesOnSurvivorsNamingIt) {
  const std::string cmd = "RINGLET_TIMEOUT_SECONDS=10 " RINGLETRUN " -np 3 " FAULT_RANK " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) output += buf;
  const int status = ::pclose(p);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
    EXPECT_EQ(failed, 16) << "every pending handle fails: " << line;
    EXPECT_NE(message.find("rank 2"), std::string::npos) << line;
    ++faults;
  }
  EXPECT_EQ(faults, 2) << "both survivors should report the fault";
  EXPECT_LT(seconds, 20.0);
}
