// Runs the ranks of one job and decides how the job ended. A rank on this
// machine is a child process; a rank on another host is the remote shell
// that runs `ringletrun --remote-agent` there (remote_agent.h), given the
// rank's command, working directory and environment on its stdin.
//
// One thread, one poll() loop over every rank's stdout and stderr pipes and a
// signalfd for SIGCHLD, SIGINT, SIGTERM and SIGHUP. The loop
//  - relays output through the OutputMux (whole, prefixed lines);
//  - reaps ranks as they exit; the first rank that fails is named once, the
//    others get abort_grace to fail on their own (printing their own error,
//    which names the failed peer), then SIGTERM, then SIGKILL kill_after later;
//    a rank killed by a signal that the launcher did not send is named too,
//    even when it is not the first failure reaped;
//  - forwards SIGINT/SIGTERM/SIGHUP to the ranks; a second one sends SIGKILL;
//  - ends once every rank is reaped and its output drained.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "hosts.h"
#include "job_env.h"

namespace ringletrun {

struct JobOptions {
  std::vector<std::string> command;  // argv of every rank
  int np = 1;
  std::vector<RankPlace> places;  // per rank; empty: all on this machine
  // For ranks on other hosts: the remote shell's words (the host follows
  // them), this ringletrun's path there, and the ranks' working directory.
  std::vector<std::string> remote_shell;
  std::string agent_path;
  std::string cwd;
  Environment base_env;  // the ranks' environment before the per-rank variables
  JobIdentity identity;
  std::chrono::milliseconds abort_grace{3000};  // RINGLET_ABORT_GRACE_SECONDS
  // Between SIGTERM and SIGKILL after a rank failed.
  std::chrono::milliseconds kill_after{2000};
  // Between a forwarded SIGINT/SIGTERM and SIGKILL: longer, because ranks that
  // were asked to stop may be saving a checkpoint. A second ^C kills at once.
  std::chrono::milliseconds kill_after_signal{10000};
  // Once every rank has exited, how long to wait for EOF on pipes that a
  // rank's leftover background process still holds open.
  std::chrono::milliseconds drain_after_exit{2000};
  bool verbose = false;
};

// Runs the job and returns ringletrun's exit code: 0 when every rank exited 0;
// else the first failing rank's code (128+signal when killed); else, when the
// launcher was interrupted, 128+that signal. Throws std::system_error when the
// job cannot be started at all (ranks started so far are killed and reaped).
int run_job(const JobOptions& options);

// Removes /dev/shm/ringlet-<job_id>-* left by ranks that died before they
// unlinked their segments. Returns how many were removed.
int remove_shm_leftovers(const std::string& job_id);

}  // namespace ringletrun
