// Runs ranks as forked processes, the cheap way to test real multi-process
// rendezvous. Fork happens before the test starts any thread (the store server
// is created after), so children inherit a single-threaded process.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace ringlet::test {

class ForkedRanks {
 public:
  // body(rank, port) runs in a child once the parent has sent the port; a
  // throw or false fails the child.
  ForkedRanks(int n, std::function<bool(int rank, uint16_t port)> body) {
    for (int r = 0; r < n; ++r) {
      int fds[2];
      if (::pipe(fds) != 0) std::abort();
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(fds[1]);
        uint16_t port = 0;
        bool ok = false;
        if (::read(fds[0], &port, sizeof port) == sizeof port) {
          try {
            ok = body(r, port);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d failed: %s\n", r, e.what());
          }
        }
        std::fflush(stderr);
        ::_exit(ok ? 0 : 1);
      }
      ::close(fds[0]);
      pids_.push_back(pid);
      pipes_.push_back(fds[1]);
    }
  }

  ~ForkedRanks() {
    for (pid_t pid : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    for (int fd : pipes_) ::close(fd);
  }

  void start(uint16_t port) {
    for (int& fd : pipes_) {
      [[maybe_unused]] auto n = ::write(fd, &port, sizeof port);
      ::close(fd);
      fd = -1;
    }
    pipes_.clear();
  }

  // Exit codes of every child (-1 for one killed at the timeout).
  std::vector<int> wait(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::vector<int> codes(pids_.size(), -1);
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (size_t i = 0; i < pids_.size(); ++i) {
      int status = 0;
      for (;;) {
        const pid_t got = ::waitpid(pids_[i], &status, WNOHANG);
        if (got == pids_[i]) {
          codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
          pids_[i] = -1;
          break;
        }
        if (std::chrono::steady_clock::now() > end) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    return codes;
  }

 private:
  std::vector<pid_t> pids_;
  std::vector<int> pipes_;
};

}  // namespace ringlet::test
