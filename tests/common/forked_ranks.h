// Ranks as forked processes: the cheap way to test real multi-process code
// (rendezvous, carriers, shared windows) inside one GoogleTest binary.
//
// Each rank is a child running body(rank, start). It exits 0, or 1 when the
// body returned false or recorded a GoogleTest failure, or 2 (after printing
// it) when an exception escaped. The parent only supervises, so a rank may
// kill itself to play a crashed peer.
//
// Children may wait for a start value from the parent (a port, typically):
// fork then happens before the parent starts any thread (a store server is
// created after forking, then start(port)), so every child inherits a
// single-threaded process.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace ringlet::test {

struct RankExit {
  bool signaled = false;
  int code = -1;  // exit status, or the signal number when signaled
};

class ForkedRanks {
 public:
  // The body's verdict: false (or a GoogleTest failure) fails the rank.
  using Body = std::function<bool(int rank, uint64_t start)>;
  enum class Start { kNow, kOnStart };

  // Forks `n` ranks. With Start::kOnStart each waits for start(value) first;
  // with kNow each runs at once with start == 0.
  ForkedRanks(int n, Body body, Start when = Start::kOnStart) {
    std::fflush(stdout);
    std::fflush(stderr);
    for (int rank = 0; rank < n; ++rank) {
      int fds[2] = {-1, -1};
      if (when == Start::kOnStart && ::pipe(fds) != 0) std::abort();
      const pid_t pid = ::fork();
      if (pid < 0) std::abort();
      if (pid == 0) run_child(rank, fds[0], fds[1], body);
      if (fds[0] >= 0) ::close(fds[0]);
      pids_.push_back(pid);
      gates_.push_back(fds[1]);
    }
  }

  // Kills and reaps whatever still runs: a failed test leaves no process.
  ~ForkedRanks() {
    for (pid_t pid : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    close_gates();
  }

  ForkedRanks(const ForkedRanks&) = delete;
  ForkedRanks& operator=(const ForkedRanks&) = delete;

  // Lets every waiting rank run with `value`.
  void start(uint64_t value) {
    for (int fd : gates_) {
      if (fd >= 0) {
        [[maybe_unused]] const auto written = ::write(fd, &value, sizeof value);
      }
    }
    close_gates();
  }

  // How each rank ended. Ranks still running at `limit` are killed (they read
  // as signaled with SIGKILL) and the test fails, naming the limit.
  std::vector<RankExit> wait(std::chrono::seconds limit = std::chrono::seconds(60)) {
    close_gates();  // a rank never started reads end-of-file and fails
    const size_t n = pids_.size();
    std::vector<RankExit> exits(n);
    auto deadline = std::chrono::steady_clock::now() + limit;
    bool killed = false;
    for (size_t left = n; left > 0;) {
      for (size_t i = 0; i < n; ++i) {
        if (pids_[i] <= 0) continue;
        int status = 0;
        if (::waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
        pids_[i] = -1;
        --left;
        exits[i].signaled = WIFSIGNALED(status);
        exits[i].code = exits[i].signaled ? WTERMSIG(status) : WEXITSTATUS(status);
      }
      if (left == 0) break;
      if (!killed && std::chrono::steady_clock::now() > deadline) {
        for (pid_t pid : pids_) {
          if (pid > 0) ::kill(pid, SIGKILL);
        }
        ADD_FAILURE() << "ranks ran past " << limit.count() << " s; killed";
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return exits;
  }

 private:
  [[noreturn]] static void run_child(int rank, int gate_in, int gate_out, const Body& body) {
    if (gate_out >= 0) ::close(gate_out);
    int code = 1;
    uint64_t start = 0;
    if (gate_in < 0 || ::read(gate_in, &start, sizeof start) == sizeof start) {
      try {
        const bool ok = body(rank, start);
        code = ok && !::testing::Test::HasFailure() ? 0 : 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: uncaught exception: %s\n", rank, e.what());
        code = 2;
      }
    } else {
      std::fprintf(stderr, "rank %d: never started\n", rank);
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
  }

  void close_gates() {
    for (int& fd : gates_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

  std::vector<pid_t> pids_;
  std::vector<int> gates_;  // write ends of the start pipes; -1 once closed
};

// Runs body(rank) in `n` forked ranks at once and waits for them all.
inline std::vector<RankExit> run_ranks(int n, const std::function<void(int)>& body,
                                       std::chrono::seconds limit = std::chrono::seconds(60)) {
  ForkedRanks ranks(
      n,
      [&body](int rank, uint64_t) {
        body(rank);
        return true;
      },
      ForkedRanks::Start::kNow);
  return ranks.wait(limit);
}

inline void expect_all_passed(const std::vector<RankExit>& exits) {
  for (size_t i = 0; i < exits.size(); ++i) {
    EXPECT_FALSE(exits[i].signaled) << "rank " << i << " died of signal " << exits[i].code;
    EXPECT_EQ(exits[i].code, 0) << "rank " << i << " failed";
  }
}

}  // namespace ringlet::test
