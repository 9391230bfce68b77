// Runs one test body per rank, each in its own forked process, and reports how
// each exited. A rank's GoogleTest failures make it exit 1; an escaping
// exception exits 2 (after printing it). The parent only supervises, so a rank
// may kill itself to play a crashed peer.
#pragma once

#include "ringlet/transport/random.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace ringlet::transport::testing {

struct RankExit {
  bool signaled = false;
  int code = -1;  // exit status, or the signal number when signaled
};

inline std::vector<RankExit> run_ranks(int n, const std::function<void(int)>& body,
                                       std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        body(rank);
        code = ::testing::Test::HasFailure() ? 1 : 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: uncaught exception: %s\n", rank, e.what());
        code = 2;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<RankExit> exits(n);
  std::vector<bool> reaped(n, false);
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (int left = n; left > 0;) {
    for (int i = 0; i < n; ++i) {
      if (reaped[i]) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      reaped[i] = true;
      --left;
      exits[i].signaled = WIFSIGNALED(status);
      exits[i].code = exits[i].signaled ? WTERMSIG(status) : WEXITSTATUS(status);
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int i = 0; i < n; ++i) {
        if (!reaped[i]) ::kill(pids[i], SIGKILL);
      }
      ADD_FAILURE() << "ranks ran past " << limit.count() << " s; killed";
      limit = std::chrono::seconds(3600);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return exits;
}

inline void expect_all_passed(const std::vector<RankExit>& exits) {
  for (size_t i = 0; i < exits.size(); ++i) {
    EXPECT_FALSE(exits[i].signaled) << "rank " << i << " died of signal " << exits[i].code;
    EXPECT_EQ(exits[i].code, 0) << "rank " << i << " failed";
  }
}

// A fresh directory for a FileStore, a job id no other test shares and the
// job's secret (carriers refuse to start without one).
struct JobDir {
  std::string dir;
  std::string job_id;
  std::string secret = ringlet::transport::random_hex(32);
  JobDir() {
    char path[] = "/tmp/ringlet-transport-test-XXXXXX";
    dir = ::mkdtemp(path);
    static int counter = 0;
    job_id = "t" + std::to_string(::getpid()) + "x" + std::to_string(counter++);
  }
  ~JobDir() { std::system(("rm -rf '" + dir + "'").c_str()); }
};

// Names in /dev/shm that belong to `job_id`: must be none after every test.
inline std::vector<std::string> leftover_segments(const std::string& job_id) {
  std::vector<std::string> names;
  std::string prefix = "ringlet-" + job_id + "-";
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

}  // namespace ringlet::transport::testing
