#include "slurm.h"

#include <cstdlib>
#include <stdexcept>

namespace ringletrun {

bool in_slurm_allocation() {
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0';
  };
  return set("SLURM_JOB_ID") && !set("SLURM_STEP_ID");
}

std::string first_slurm_host(std::string_view nodelist) {
  auto bad = [&nodelist](const char* why) {
    return std::invalid_argument("cannot read the Slurm node list '" + std::string(nodelist) +
                                 "': " + why);
  };
  // The first entry ends at the first comma outside brackets.
  std::size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    char c = nodelist[end];
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) throw bad("a ']' without its '['");
    if (c == ',' && depth == 0) break;
  }
  if (depth != 0) throw bad("a '[' without its ']'");
  std::string_view entry = nodelist.substr(0, end);
  if (entry.empty()) throw bad("no host");
  // Each "[07-09,12]" stands for its first number, zeros kept ("node[07-09]-ib[1-2]"
  // -> "node07-ib1").
  std::string host;
  while (!entry.empty()) {
    std::size_t open = entry.find('[');
    if (open == std::string_view::npos) {
      host += entry;
      break;
    }
    std::size_t close = entry.find(']', open);
    std::string_view range = entry.substr(open + 1, close - open - 1);
    std::string_view first = range.substr(0, range.find_first_of(",-"));
    if (first.empty() || first.find_first_not_of("0123456789") != std::string_view::npos) {
      throw bad("a range that does not start with a number");
    }
    host.append(entry.substr(0, open)).append(first);
    entry.remove_prefix(close + 1);
  }
  return host;
}

}  // namespace ringletrun
