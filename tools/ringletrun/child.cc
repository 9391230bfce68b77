#include "child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

namespace ringletrun {
namespace {

struct Pipe {
  Fd read_end;
  Fd write_end;
};

Pipe make_pipe() {
  int fds[2];
  // CLOEXEC so that no rank inherits another rank's pipes: a leaked write end
  // would keep ringletrun waiting for an EOF that never comes.
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "pipe2");
  Pipe p{Fd(fds[0]), Fd(fds[1])};
  // The launcher multiplexes all pipes in one poll() loop and must never block
  // on a single rank.
  ::fcntl(p.read_end.get(), F_SETFL, ::fcntl(p.read_end.get(), F_GETFL) | O_NONBLOCK);
  return p;
}

void write_str(int fd, const char* s) {
  size_t len = std::strlen(s);
  while (len > 0) {
    ssize_t n = ::write(fd, s, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s += n;
    len -= static_cast<size_t>(n);
  }
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Runs in the forked child: only plain system calls, then exec.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, int in, int out, int err,
                             pid_t launcher) {
  // If ringletrun dies, even by SIGKILL, its ranks must not live on as orphans.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl

  if (in >= 0) ::dup2(in, STDIN_FILENO);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(err, STDERR_FILENO);

  // The launcher blocks the signals it reads through a signalfd and ignores
  // SIGPIPE; a signal mask and SIG_IGN survive exec, so undo both.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);

  ::execvpe(argv[0], argv, envp);
  int e = errno;
  write_str(STDERR_FILENO, "ringletrun: cannot execute '");
  write_str(STDERR_FILENO, argv[0]);
  write_str(STDERR_FILENO, "': ");
  write_str(STDERR_FILENO, std::strerror(e));
  write_str(STDERR_FILENO, "\n");
  ::_exit(127);
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

Child Child::spawn(const ChildSpec& spec) {
  if (spec.argv.empty()) throw std::invalid_argument("Child::spawn: empty argv");
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  Fd devnull;
  std::optional<Pipe> in;
  if (spec.stdin_data) {
    in = make_pipe();
    // This end is the child's stdin, which it reads as any blocking stdin.
    ::fcntl(in->read_end.get(), F_SETFL, ::fcntl(in->read_end.get(), F_GETFL) & ~O_NONBLOCK);
  } else if (!spec.inherit_stdin) {
    devnull.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull.valid()) throw std::system_error(errno, std::generic_category(), "open /dev/null");
  }
  // Built before fork so that the child only makes system calls.
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);
  pid_t launcher = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    int stdin_fd = in ? in->read_end.get() : spec.inherit_stdin ? -1 : devnull.get();
    exec_child(argv.data(), envp.data(), stdin_fd, out.write_end.get(), err.write_end.get(),
               launcher);
  }
  Fd in_write;
  if (in) {
    in_write = std::move(in->write_end);
    in->read_end.reset();
    // Blocking: the child reads its block at once. A child that exits unread
    // fails the write (SIGPIPE is ignored by the launcher), and its exit
    // status tells what went wrong.
    write_all(in_write.get(), *spec.stdin_data);
  }
  // The write ends now belong to the child alone, so its exit means EOF here.
  return Child(pid, std::move(in_write), std::move(out.read_end), std::move(err.read_end));
}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      status_(std::exchange(other.status_, std::nullopt)),
      in_(std::move(other.in_)),
      out_(std::move(other.out_)),
      err_(std::move(other.err_)) {}

Child::~Child() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  int status;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void Child::signal(int sig) const {
  if (running()) ::kill(pid_, sig);
}

bool Child::try_reap() {
  if (!running()) return status_.has_value();
  int status;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    status_ = status;
  } else if (r < 0 && errno == ECHILD) {
    // Reaped behind our back (cannot happen while SIGCHLD is not ignored); the
    // status is lost, so report a failure rather than wait forever.
    status_ = 255 << 8;
  }
  return status_.has_value();
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "unknown") + ")";
  }
  return "stopped with wait status " + std::to_string(status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace ringletrun
