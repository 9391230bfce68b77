#include "hosts.h"

#include <charconv>
#include <stdexcept>

#include "ringlet/common/host_name.h"

namespace ringletrun {
namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  std::size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

int parse_slots(std::string_view text, std::string_view entry) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n <= 0) {
    throw std::invalid_argument("bad slot count in '" + std::string(entry) +
                                "' (expected a positive integer)");
  }
  return n;
}

// "host" or "host:N". An IPv6 address has colons of its own, so only a
// trailing ":digits" after a bracketed or colon-free host counts as slots.
HostSlots parse_entry(std::string_view entry) {
  entry = trim(entry);
  if (entry.empty()) throw std::invalid_argument("empty host name");
  std::size_t colon = entry.rfind(':');
  bool has_slots =
      colon != std::string_view::npos &&
      (entry.find(':') == colon || (entry.front() == '[' && colon > 0 && entry[colon - 1] == ']'));
  HostSlots h;
  if (has_slots) {
    h.host = std::string(entry.substr(0, colon));
    h.slots = parse_slots(entry.substr(colon + 1), entry);
  } else {
    h.host = std::string(entry);
  }
  if (h.host.size() > 2 && h.host.front() == '[' && h.host.back() == ']') {
    h.host = h.host.substr(1, h.host.size() - 2);
  }
  if (h.host.empty())
    throw std::invalid_argument("empty host name in '" + std::string(entry) + "'");
  return h;
}

}  // namespace

std::vector<HostSlots> parse_host_list(std::string_view list) {
  std::vector<HostSlots> hosts;
  while (true) {
    std::size_t comma = list.find(',');
    hosts.push_back(parse_entry(list.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return hosts;
}

std::vector<HostSlots> parse_hostfile(std::istream& in) {
  std::vector<HostSlots> hosts;
  std::string raw;
  while (std::getline(in, raw)) {
    std::string_view line = raw;
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::size_t space = line.find_first_of(" \t");
    if (space == std::string_view::npos) {
      hosts.push_back(parse_entry(line));
      continue;
    }
    HostSlots h;
    h.host = std::string(line.substr(0, space));
    std::string_view rest = trim(line.substr(space));
    constexpr std::string_view kSlots = "slots=";
    if (rest.substr(0, kSlots.size()) != kSlots) {
      throw std::invalid_argument("bad hostfile line '" + std::string(line) +
                                  "' (expected 'host slots=N')");
    }
    h.slots = parse_slots(trim(rest.substr(kSlots.size())), line);
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) throw std::invalid_argument("the hostfile names no host");
  return hosts;
}

bool is_local_host(std::string_view host, std::string_view this_hostname) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  if (this_hostname.empty()) return false;
  if (host == this_hostname) return true;
  // "node7" names "node7.cluster.example" and the other way round; an IP
  // address has no short form ("10.0.0.5" is not "10").
  if (host.find_first_not_of("0123456789.") == std::string_view::npos) return false;
  auto short_name = [](std::string_view s) { return s.substr(0, s.find('.')); };
  return short_name(host) == short_name(this_hostname) &&
         (host.find('.') == std::string_view::npos ||
          this_hostname.find('.') == std::string_view::npos);
}

std::string this_hostname() { return ringlet::common::host_name(); }

}  // namespace ringletrun
