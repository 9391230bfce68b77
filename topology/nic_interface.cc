#include "ringlet/topology/nic_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <fstream>
#include <memory>

namespace ringlet::topology {
namespace {

int rp_filter_of(const std::string& conf) {
  std::ifstream in("/proc/sys/net/ipv4/conf/" + conf + "/rp_filter");
  int v = 0;
  return in >> v ? v : 0;
}

}  // namespace

std::vector<Ipv4Interface> ipv4_interfaces() {
  std::vector<Ipv4Interface> out;
  ifaddrs* raw = nullptr;
  if (::getifaddrs(&raw) != 0) return out;
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> list(raw, &::freeifaddrs);
  const int all = rp_filter_of("all");
  for (const ifaddrs* it = raw; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    Ipv4Interface i;
    i.name = it->ifa_name;
    i.address = ntohl(reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr);
    if (it->ifa_netmask != nullptr) {
      i.netmask = ntohl(reinterpret_cast<const sockaddr_in*>(it->ifa_netmask)->sin_addr.s_addr);
    }
    i.up = (it->ifa_flags & IFF_UP) != 0;
    i.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    i.rp_filter = std::max(all, rp_filter_of(i.name));
    out.push_back(std::move(i));
  }
  return out;
}

std::string interface_with_address(const std::vector<Ipv4Interface>& here,
                                   const std::string& address) {
  const auto a = parse_ipv4(address);
  if (!a) return "";
  for (const Ipv4Interface& i : here) {
    if (i.address == *a) return i.name;
  }
  return "";
}

std::optional<uint32_t> parse_ipv4(const std::string& dotted) {
  in_addr a{};
  if (::inet_pton(AF_INET, dotted.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::string ipv4_text(uint32_t address) {
  in_addr a{};
  a.s_addr = htonl(address);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

NicInterface nic_interface(const PciDevice& nic, const std::vector<Ipv4Interface>& here,
                           uint32_t rank0_address, const std::string& route_interface) {
  NicInterface out;
  const std::string rank0 = ipv4_text(rank0_address);
  if (nic.netdevs.empty()) {
    out.reason = "it has no network interface";
    return out;
  }
  std::string refused;
  for (const std::string& name : nic.netdevs) {
    for (const Ipv4Interface& i : here) {
      if (i.name != name || !i.up || i.loopback) continue;
      const std::string address = ipv4_text(i.address);
      if (name == route_interface) {
        return {name, address, "the route to rank 0 (" + rank0 + ") goes through " + name};
      }
      if ((i.address & i.netmask) != (rank0_address & i.netmask)) continue;
      if (i.rp_filter == 1) {
        refused = name + " is on rank 0's subnet but the route to " + rank0 + " goes through " +
                  (route_interface.empty() ? "another interface" : route_interface) +
                  " and rp_filter is strict";
        continue;
      }
      return {name, address, name + " (" + address + ") is on rank 0's subnet"};
    }
  }
  std::string names;
  for (const std::string& n : nic.netdevs) names += (names.empty() ? "" : ", ") + n;
  out.reason = !refused.empty()
                   ? refused
                   : "none of its interfaces (" + names +
                         ") is up with an IPv4 address on rank 0's subnet (" + rank0 + ")";
  return out;
}

}  // namespace ringlet::topology
