// A whole job run the way a user runs one: a shell command line (ringletrun
// and its ranks), its output and exit status collected, and how long it took.
// The fault tests read the ranks' reports from the output and the launcher's
// verdict from the status.
#pragma once

#include <stdio.h>

#include <chrono>
#include <string>

namespace ringlet::test {

struct JobRun {
  int status = -1;     // pclose()'s wait status (WIFEXITED, ...); -1: it did not start
  std::string output;  // stdout and stderr, interleaved as printed
  double seconds = 0;  // from start to exit
};

// Runs `command` through the shell with stderr joined to stdout, and waits
// for it to exit.
inline JobRun run_job(const std::string& command) {
  JobRun r;
  const auto start = std::chrono::steady_clock::now();
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) r.output += buf;
  r.status = ::pclose(p);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace ringlet::test
