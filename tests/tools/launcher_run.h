// Runs the built ringletrun (or any command) with its output captured, a
// deadline and signals sent on cue, for the launcher's tests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace launcher_test {

using Clock = std::chrono::steady_clock;

// Send `signal` to ringletrun once its stdout holds `count` copies of `marker`.
struct SignalStep {
  std::string marker;
  int count = 1;
  int signal = SIGTERM;
};

struct RunOptions {
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<SignalStep> steps;
  std::chrono::seconds timeout{30};
  std::vector<int> ignored_signals;  // SIG_IGN in ringletrun, as nohup or `cmd &` leave them
};

struct Result {
  int exit_code = -1;  // -1 when ringletrun itself was killed
  int term_signal = 0;
  std::string out;
  std::string err;
  double seconds = 0;
  bool timed_out = false;
};

inline RunOptions with_env(const std::string& name, const std::string& value) {
  RunOptions o;
  o.env = {{name, value}};
  return o;
}

inline RunOptions with_steps(std::vector<SignalStep> steps) {
  RunOptions o;
  o.steps = std::move(steps);
  return o;
}

inline std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Runs argv_s (argv_s[0] a path) with stdout and stderr captured.
inline Result run_process(std::vector<std::string> argv_s, const RunOptions& opt) {
  int out[2], err[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    // Whatever the test runner ignores, the job under test starts clean.
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s : opt.ignored_signals) ::signal(s, SIG_IGN);
    for (const auto& [k, v] : opt.env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execv(argv[0], argv.data());
    ::_exit(126);
  }
  ::close(out[1]);
  ::close(err[1]);

  Result r;
  std::size_t step = 0;
  auto deadline = start + opt.timeout;
  int fds[2] = {out[0], err[0]};
  std::string* sinks[2] = {&r.out, &r.err};
  while (fds[0] >= 0 || fds[1] >= 0) {
    if (step < opt.steps.size() && count_of(r.out, opt.steps[step].marker) >=
                                       static_cast<std::size_t>(opt.steps[step].count)) {
      ::kill(pid, opt.steps[step].signal);
      ++step;
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      if (!r.timed_out) {
        r.timed_out = true;
        ::kill(pid, SIGKILL);
        deadline = Clock::now() + std::chrono::seconds(5);  // for the pipes to close
        continue;
      }
      break;
    }
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    ::poll(p, 2, static_cast<int>(left.count()));
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || p[i].revents == 0) continue;
      char buf[65536];
      ssize_t n = ::read(fds[i], buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  int status = 0;
  if (!r.timed_out && ::waitpid(pid, &status, WNOHANG) == 0) {
    // Pipes closed but ringletrun still running: give it the rest of the time.
    while (::waitpid(pid, &status, WNOHANG) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (Clock::now() >= deadline) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  } else if (r.timed_out) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  return r;
}

inline Result run_ringletrun(const std::vector<std::string>& args, const RunOptions& opt = {}) {
  std::vector<std::string> argv = {RINGLETRUN_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(std::move(argv), opt);
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The lines rank `rank` wrote to `stream`, prefix removed.
inline std::vector<std::string> rank_lines(const std::string& text, int rank,
                                    const std::string& stream = "stdout") {
  std::string prefix = "[" + std::to_string(rank) + "]<" + stream + ">:";
  std::vector<std::string> out;
  for (const auto& l : lines_of(text)) {
    if (l.rfind(prefix, 0) == 0) out.push_back(l.substr(prefix.size()));
  }
  return out;
}

// True when the process is gone (or a zombie nobody in this container reaps).
inline bool process_gone(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  // A process reaped between the open and the read reads as an error (ESRCH),
  // which a stream would throw as an exception.
  if (n <= 0) return true;
  const std::string content(buf, static_cast<size_t>(n));
  auto close_paren = content.rfind(')');
  return close_paren != std::string::npos && content.size() > close_paren + 2 &&
         content[close_paren + 2] == 'Z';
}

inline bool all_gone_within(const std::vector<pid_t>& pids, std::chrono::seconds limit) {
  auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    bool all = true;
    for (pid_t p : pids) all = all && process_gone(p);
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

inline std::vector<pid_t> pids_in(const std::string& out, int np, const std::string& tag = "pid ") {
  std::vector<pid_t> pids;
  for (int r = 0; r < np; ++r) {
    for (const auto& l : rank_lines(out, r)) {
      if (l.rfind(tag, 0) == 0) pids.push_back(std::stoi(l.substr(tag.size())));
    }
  }
  return pids;
}

}  // namespace launcher_test
