#include "agent_wire.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace ringletrun {
namespace {

constexpr std::string_view kMagic = "RINGLET-AGENT/1";

// Reads the NUL-terminated fields of a block one by one.
class Fields {
 public:
  explicit Fields(std::string_view bytes) : rest_(bytes) {}

  // The next field, or nullopt when its terminator has not arrived yet.
  std::optional<std::string_view> next() {
    std::size_t end = rest_.find('\0');
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view field = rest_.substr(0, end);
    rest_.remove_prefix(end + 1);
    return field;
  }

  std::optional<std::size_t> count(const char* what) {
    auto field = next();
    if (!field) return std::nullopt;
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(field->data(), field->data() + field->size(), n);
    if (ec != std::errc() || end != field->data() + field->size() || n > kMaxAgentBlock) {
      throw std::invalid_argument(std::string("the launch block's ") + what +
                                  " count is not a number");
    }
    return n;
  }

 private:
  std::string_view rest_;
};

}  // namespace

std::string encode_agent_launch(const AgentLaunch& launch) {
  std::string out;
  auto field = [&out](std::string_view s) {
    out.append(s);
    out.push_back('\0');
  };
  field(kMagic);
  field(launch.cwd);
  field(std::to_string(launch.argv.size()));
  for (const auto& a : launch.argv) field(a);
  field(std::to_string(launch.env.size()));
  for (const auto& e : launch.env) field(e);
  return out;
}

std::optional<AgentLaunch> decode_agent_launch(std::string_view bytes) {
  // A peer that is not a launcher (or a launcher of another version) is
  // refused at its first bytes, before anything is held for it.
  const std::string magic = std::string(kMagic) + '\0';
  const std::size_t seen = std::min(bytes.size(), magic.size());
  if (bytes.substr(0, seen) != std::string_view(magic).substr(0, seen)) {
    throw std::invalid_argument("stdin does not start with a launch block from ringletrun");
  }
  if (bytes.size() > kMaxAgentBlock) {
    throw std::invalid_argument("the launch block is larger than " +
                                std::to_string(kMaxAgentBlock) + " bytes");
  }
  Fields fields(bytes);
  AgentLaunch launch;
  if (!fields.next()) return std::nullopt;  // the magic, checked above
  auto cwd = fields.next();
  if (!cwd) return std::nullopt;
  launch.cwd = *cwd;
  auto argc = fields.count("argv");
  if (!argc) return std::nullopt;
  if (*argc == 0) throw std::invalid_argument("the launch block has an empty command");
  for (std::size_t i = 0; i < *argc; ++i) {
    auto word = fields.next();
    if (!word) return std::nullopt;
    launch.argv.emplace_back(*word);
  }
  auto envc = fields.count("environment");
  if (!envc) return std::nullopt;
  for (std::size_t i = 0; i < *envc; ++i) {
    auto entry = fields.next();
    if (!entry) return std::nullopt;
    if (entry->empty() || entry->find('=') == std::string_view::npos || entry->front() == '=') {
      throw std::invalid_argument("the launch block has an environment entry without a name");
    }
    launch.env.emplace_back(*entry);
  }
  return launch;
}

}  // namespace ringletrun
