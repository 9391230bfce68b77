// `ringletrun --remote-agent`: what the launcher runs on another host (through
// ssh or the --rsh command) to start one rank there.
//
// It reads the launch block (agent_wire.h) from stdin, enters the working
// directory, starts the command in a process group of its own with the
// block's environment laid over the agent's, and then stands for the rank:
//  - SIGINT, SIGTERM and SIGHUP it receives go to the rank's group;
//  - stdin closing means the launcher (or the remote shell carrying it) is
//    gone: the group gets SIGTERM, then SIGKILL, so that no rank outlives its
//    job on a host the launcher can no longer reach;
//  - once the rank exits, what it left running in its group is killed, and the
//    agent exits with the rank's status, or dies of the rank's signal.
// The rank inherits the agent's stdout and stderr, which the remote shell
// carries back to the launcher.
#pragma once

#include <chrono>

namespace ringletrun {

// Between the SIGTERM and the SIGKILL sent when the launcher is gone.
inline constexpr std::chrono::milliseconds kAgentKillAfter{3000};

// Runs the agent; returns its exit code when it does not die of the rank's signal.
int run_remote_agent();

}  // namespace ringletrun
