#include "hosts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <charconv>
#include <map>
#include <set>
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

std::vector<RankPlace> place_ranks(const std::vector<HostSlots>& hosts, int np,
                                   std::string_view this_hostname) {
  std::vector<RankPlace> places;
  places.reserve(static_cast<std::size_t>(np));
  std::map<std::string, int> index_of;   // host -> host_index
  std::map<std::string, int> ranks_on;   // host -> ranks placed so far
  long slots = 0;
  for (const HostSlots& h : hosts) {
    slots += h.slots;
    std::string host = is_local_host(h.host, this_hostname) ? "" : h.host;
    for (int s = 0; s < h.slots && static_cast<int>(places.size()) < np; ++s) {
      RankPlace p;
      p.host = host;
      p.host_index = index_of.emplace(host, static_cast<int>(index_of.size())).first->second;
      p.local_rank = ranks_on[host]++;
      places.push_back(std::move(p));
    }
  }
  if (slots < np) {
    throw std::invalid_argument("-np " + std::to_string(np) + " needs " + std::to_string(np) +
                                " slots but the hosts give " + std::to_string(slots));
  }
  // The cross rank of a rank: its host's place among the hosts that have a
  // rank of the same local rank.
  std::map<int, std::vector<int>> hosts_with_local_rank;  // local rank -> host indices
  for (RankPlace& p : places) {
    p.local_size = ranks_on[p.host];
    auto& with = hosts_with_local_rank[p.local_rank];
    p.cross_rank = static_cast<int>(with.size());
    with.push_back(p.host_index);
  }
  for (RankPlace& p : places) {
    p.cross_size = static_cast<int>(hosts_with_local_rank[p.local_rank].size());
  }
  return places;
}

std::vector<RankPlace> place_here(int np) {
  return place_ranks({HostSlots{"localhost", np}}, np, "");
}

std::string interface_address(std::string_view interface) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw std::invalid_argument("cannot list network interfaces");
  std::string found;
  std::set<std::string> names;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    names.insert(it->ifa_name);
    bool wanted = interface.empty() ? (it->ifa_flags & IFF_UP) && !(it->ifa_flags & IFF_LOOPBACK)
                                    : interface == it->ifa_name;
    char text[INET_ADDRSTRLEN];
    auto* in = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
    if (wanted && found.empty() && ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) {
      found = text;
    }
  }
  ::freeifaddrs(list);
  if (found.empty()) {
    std::string available;
    for (const std::string& n : names) available += (available.empty() ? "" : ", ") + n;
    throw std::invalid_argument(
        (interface.empty() ? std::string("this host has no network interface up")
                           : "network interface '" + std::string(interface) + "' has no IPv4 address here") +
        " (interfaces with one: " + (available.empty() ? "none" : available) + ")");
  }
  return found;
}

}  // namespace ringletrun
