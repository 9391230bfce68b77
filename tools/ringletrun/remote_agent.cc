#include "remote_agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent_wire.h"
#include "fd.h"
#include "job_env.h"
#include "output_mux.h"
#include "ringlet/common/host_name.h"

namespace ringletrun {
namespace {

using Clock = std::chrono::steady_clock;

// The host as Ringlet names it: RINGLET_HOSTNAME where set, else the machine's name.
std::string host_name() {
  const char* name = std::getenv("RINGLET_HOSTNAME");
  return name && *name ? name : ringlet::common::host_name();
}

void say(const std::string& line) {
  std::string text = "ringletrun agent on " + host_name() + ": " + line + "\n";
  write_fully(STDERR_FILENO, text);
}

// Reads stdin until a whole launch block has arrived.
AgentLaunch read_launch() {
  std::string bytes;
  char buf[64 * 1024];
  while (true) {
    if (auto launch = decode_agent_launch(bytes)) return *launch;
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("reading stdin: ") + std::strerror(errno));
    if (n == 0) throw std::runtime_error("stdin closed before the launch block was complete");
    bytes.append(buf, static_cast<std::size_t>(n));
  }
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Forks the rank into a process group of its own. Only system calls after fork.
pid_t start_rank(const AgentLaunch& launch, const std::vector<std::string>& env) {
  std::vector<char*> argv = c_strings(launch.argv);
  std::vector<char*> envp = c_strings(env);
  Fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  pid_t agent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the agent killed outright takes its rank along
    if (::getppid() != agent) ::_exit(127);
    if (devnull.valid()) ::dup2(devnull.get(), STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execvpe(argv[0], argv.data(), envp.data());
    std::string why = std::string("cannot execute '") + argv[0] + "': " + std::strerror(errno);
    say(why);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that no signal can reach the group before it exists
  return pid;
}

// Dies of `sig` as the rank did, so that the launcher reads the same wait status.
[[noreturn]] void die_of(int sig) {
  ::signal(sig, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);
}

}  // namespace

int run_remote_agent() {
  AgentLaunch launch;
  try {
    launch = read_launch();
  } catch (const std::exception& e) {
    say(e.what());
    return 2;
  }
  if (::chdir(launch.cwd.c_str()) != 0) {
    say("cannot enter the working directory " + launch.cwd + ": " + std::strerror(errno));
    return 1;
  }
  Environment env = Environment::from_process();
  for (const std::string& entry : launch.env) {
    std::size_t eq = entry.find('=');
    env.set(std::string_view(entry).substr(0, eq), std::string_view(entry).substr(eq + 1));
  }

  ::signal(SIGCHLD, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  Fd signals(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signals.valid()) {
    say(std::string("signalfd: ") + std::strerror(errno));
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);  // the remote shell's pipes may close before we are done

  pid_t rank;
  try {
    rank = start_rank(launch, env.entries());
  } catch (const std::exception& e) {
    say(e.what());
    return 1;
  }

  bool launcher_gone = false;
  std::optional<Clock::time_point> kill_at;
  while (true) {
    pollfd fds[2] = {{signals.get(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    const nfds_t count = launcher_gone ? 1 : 2;
    int timeout = -1;
    if (kill_at) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_at - Clock::now()).count();
      timeout = static_cast<int>(std::max<long long>(left, 0));
    }
    int n = ::poll(fds, count, timeout);
    if (n < 0 && errno != EINTR) {
      say(std::string("poll: ") + std::strerror(errno));
      ::kill(-rank, SIGKILL);
    }
    if (count == 2 && fds[1].revents != 0) {
      char buf[4096];
      ssize_t got = ::read(STDIN_FILENO, buf, sizeof buf);
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
        launcher_gone = true;
        say("the launcher is gone; stopping the rank");
        ::kill(-rank, SIGTERM);
        kill_at = Clock::now() + kAgentKillAfter;
      }
    }
    if (fds[0].revents != 0) {
      signalfd_siginfo si;
      while (::read(signals.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo != SIGCHLD) ::kill(-rank, static_cast<int>(si.ssi_signo));
      }
    }
    if (kill_at && Clock::now() >= *kill_at) {
      ::kill(-rank, SIGKILL);
      kill_at.reset();
    }
    int status = 0;
    pid_t done = ::waitpid(rank, &status, WNOHANG);
    if (done == rank) {
      ::kill(-rank, SIGKILL);  // what the rank left behind in its group
      if (WIFSIGNALED(status)) die_of(WTERMSIG(status));
      return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
  }
}

}  // namespace ringletrun
