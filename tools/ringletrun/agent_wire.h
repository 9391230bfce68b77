// What the launcher tells the agent that starts a rank on another host
// (remote_agent.h): the command, the working directory and the environment,
// sent through the agent's stdin so that none of it (the job secret least of
// all) appears on a command line that other users of that host can read.
//
// The block is "RINGLET-AGENT/1\0", then NUL-terminated fields: the working
// directory, the count of argv words, the words, the count of environment
// entries, the entries ("NAME=value"). Nothing follows it: the launcher keeps
// the stream open and closing it means the launcher is gone.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringletrun {

struct AgentLaunch {
  std::string cwd;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value", laid over the agent's own
};

// The largest block an agent accepts: a bound on what a wrong peer can make it hold.
inline constexpr std::size_t kMaxAgentBlock = 16u << 20;

std::string encode_agent_launch(const AgentLaunch& launch);

// Parses the block at the start of `bytes`. Returns nullopt while more bytes
// are needed; throws std::invalid_argument for a block that is malformed or
// larger than kMaxAgentBlock.
std::optional<AgentLaunch> decode_agent_launch(std::string_view bytes);

}  // namespace ringletrun
