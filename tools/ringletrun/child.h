// One rank's process, owned by ringletrun: started with its stdout and stderr
// piped back, and never left behind. Destroying a Child that is still running
// kills and reaps it, so every exit path of the launcher (including an
// exception) leaves no zombie and no orphan.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "fd.h"

namespace ringletrun {

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH (execvp)
  std::vector<std::string> env;   // "NAME=value", the child's whole environment
  bool inherit_stdin = false;     // otherwise stdin is /dev/null, or:
  // Written to the child's stdin through a pipe that stays open for the
  // child's life (a remote agent reads its launch block there, and takes the
  // pipe's end for the launcher's).
  std::optional<std::string> stdin_data;
};

class Child {
 public:
  // Forks and execs. Throws std::system_error when the pipes or fork fail; an
  // exec failure shows up as the child writing a message on its stderr pipe and
  // exiting with 127, as a shell does.
  static Child spawn(const ChildSpec& spec);

  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !status_; }

  // Sends sig if the child has not been reaped yet (a reaped pid may already
  // belong to some other process).
  void signal(int sig) const;

  // Reaps the child if it has exited; never blocks. True once it is reaped.
  bool try_reap();

  // The wait status (as from waitpid) once reaped.
  std::optional<int> wait_status() const { return status_; }

  Fd& stdout_pipe() { return out_; }
  Fd& stderr_pipe() { return err_; }
  const Fd& stdout_pipe() const { return out_; }
  const Fd& stderr_pipe() const { return err_; }

 private:
  Child(pid_t pid, Fd in, Fd out, Fd err)
      : pid_(pid), in_(std::move(in)), out_(std::move(out)), err_(std::move(err)) {}

  pid_t pid_ = -1;
  std::optional<int> status_;
  Fd in_;  // the write end of stdin_data's pipe
  Fd out_;
  Fd err_;
};

// "exited with status 3" / "was killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

// The exit code a shell would report for this wait status (128+signal if killed).
int exit_code_of(int status);

}  // namespace ringletrun
