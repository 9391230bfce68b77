// From a NIC the topology names to the network interface TCP links can use:
// this machine's IPv4 interfaces, and the choice among a NIC's interfaces of
// one that reaches rank 0. A wrong choice breaks the job, so the rule is
// narrow: an interface qualifies only where rank 0's address is on its own
// subnet (or the route to rank 0 goes through it anyway), and not where the
// kernel's strict reverse-path filter would drop what peers send to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ringlet/topology/topology.h"

namespace ringlet::topology {

// One IPv4 address of one interface of this machine.
struct Ipv4Interface {
  std::string name;      // "eth0"
  uint32_t address = 0;  // host byte order
  uint32_t netmask = 0;  // host byte order
  bool up = false;
  bool loopback = false;
  // The reverse-path filter in force on it: the larger of net.ipv4.conf.all
  // and the interface's own rp_filter (0 off, 1 strict, 2 loose).
  int rp_filter = 0;
};

// This machine's, in getifaddrs() order; empty where it cannot list them.
std::vector<Ipv4Interface> ipv4_interfaces();

// The interface holding `address` (dotted), or "".
std::string interface_with_address(const std::vector<Ipv4Interface>& here,
                                   const std::string& address);

std::optional<uint32_t> parse_ipv4(const std::string& dotted);
std::string ipv4_text(uint32_t address);

struct NicInterface {
  std::string interface;  // "" when none of the NIC's interfaces qualifies
  std::string address;    // its IPv4 address (dotted), where TCP links listen
  std::string reason;     // how it reaches rank 0, or why none qualifies
};

// Of `nic`'s network interfaces (PciDevice::netdevs, in order), the first
// that is up with an IPv4 address on rank 0's subnet, or the one the route to
// rank 0 takes (`route_interface`, where this rank's store connection went
// out). One on rank 0's subnet that is not the route's is refused under a
// strict reverse-path filter: the kernel would answer peers from the other.
NicInterface nic_interface(const PciDevice& nic, const std::vector<Ipv4Interface>& here,
                           uint32_t rank0_address, const std::string& route_interface);

}  // namespace ringlet::topology
