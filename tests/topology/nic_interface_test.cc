// The interface a rank's NIC gives its TCP links: only one that reaches rank
// 0, worked out on interface lists written here.
#include "ringlet/topology/nic_interface.h"

#include <gtest/gtest.h>

namespace ringlet::topology {
namespace {

Ipv4Interface iface(const std::string& name, const std::string& address, const std::string& mask,
                    int rp_filter = 0) {
  Ipv4Interface i;
  i.name = name;
  i.address = *parse_ipv4(address);
  i.netmask = *parse_ipv4(mask);
  i.up = true;
  i.rp_filter = rp_filter;
  return i;
}

PciDevice nic(std::vector<std::string> netdevs) {
  PciDevice d;
  d.kind = DeviceKind::kNic;
  d.name = "mlx5_0";
  d.netdevs = std::move(netdevs);
  return d;
}

const uint32_t kRank0 = *parse_ipv4("10.1.0.1");

TEST(NicInterface, TakesAnInterfaceOnRankZerosSubnet) {
  const std::vector<Ipv4Interface> here = {iface("eno1", "192.168.0.5", "255.255.255.0"),
                                           iface("ib0", "10.1.0.7", "255.255.0.0")};
  const NicInterface c = nic_interface(nic({"ib0"}), here, kRank0, "eno1");
  EXPECT_EQ(c.interface, "ib0");
  EXPECT_EQ(c.address, "10.1.0.7");
  EXPECT_EQ(c.reason, "ib0 (10.1.0.7) is on rank 0's subnet");
}

TEST(NicInterface, TakesTheInterfaceTheRouteToRankZeroUses) {
  const std::vector<Ipv4Interface> here = {iface("ib0", "172.16.0.7", "255.255.255.0")};
  const NicInterface c = nic_interface(nic({"ib0"}), here, kRank0, "ib0");
  EXPECT_EQ(c.interface, "ib0");
  EXPECT_EQ(c.reason, "the route to rank 0 (10.1.0.1) goes through ib0");
}

TEST(NicInterface, RefusesAnInterfaceThatDoesNotReachRankZero) {
  const std::vector<Ipv4Interface> here = {iface("eno1", "10.1.0.9", "255.255.0.0"),
                                           iface("ib0", "192.168.100.7", "255.255.255.0")};
  NicInterface c = nic_interface(nic({"ib0"}), here, kRank0, "eno1");
  EXPECT_EQ(c.interface, "");
  EXPECT_EQ(
      c.reason,
      "none of its interfaces (ib0) is up with an IPv4 address on rank 0's subnet (10.1.0.1)");
  // Down, or without an address at all.
  Ipv4Interface down = iface("ib1", "10.1.0.8", "255.255.0.0");
  down.up = false;
  EXPECT_EQ(nic_interface(nic({"ib1"}), {down}, kRank0, "eno1").interface, "");
  EXPECT_EQ(nic_interface(nic({"ib2"}), here, kRank0, "eno1").interface, "");
  c = nic_interface(nic({}), here, kRank0, "eno1");
  EXPECT_EQ(c.reason, "it has no network interface");
}

// Two interfaces on rank 0's subnet, the route through the other: under a
// strict reverse-path filter the kernel would drop what peers send to this one.
TEST(NicInterface, RefusesUnderAStrictReversePathFilter) {
  const std::vector<Ipv4Interface> here = {iface("eno1", "10.1.0.9", "255.255.0.0"),
                                           iface("ib0", "10.1.0.7", "255.255.0.0", 1)};
  NicInterface c = nic_interface(nic({"ib0"}), here, kRank0, "eno1");
  EXPECT_EQ(c.interface, "");
  EXPECT_EQ(c.reason,
            "ib0 is on rank 0's subnet but the route to 10.1.0.1 goes through eno1 and rp_filter "
            "is strict");
  // Loose (2) is fine.
  const std::vector<Ipv4Interface> loose = {iface("ib0", "10.1.0.7", "255.255.0.0", 2)};
  EXPECT_EQ(nic_interface(nic({"ib0"}), loose, kRank0, "eno1").interface, "ib0");
}

TEST(NicInterface, SecondNetdevWhenTheFirstDoesNotReach) {
  const std::vector<Ipv4Interface> here = {iface("ens1f0", "192.168.1.2", "255.255.255.0"),
                                           iface("ens1f1", "10.1.3.3", "255.255.0.0")};
  EXPECT_EQ(nic_interface(nic({"ens1f0", "ens1f1"}), here, kRank0, "").interface, "ens1f1");
}

TEST(NicInterface, AddressesReadAndWrite) {
  EXPECT_EQ(ipv4_text(*parse_ipv4("10.1.0.1")), "10.1.0.1");
  EXPECT_FALSE(parse_ipv4("10.1.0"));
  EXPECT_FALSE(parse_ipv4("::1"));
  const std::vector<Ipv4Interface> here = {iface("lo", "127.0.0.1", "255.0.0.0")};
  EXPECT_EQ(interface_with_address(here, "127.0.0.1"), "lo");
  EXPECT_EQ(interface_with_address(here, "10.0.0.1"), "");
  // This machine's own list has loopback at least where it lists any.
  for (const Ipv4Interface& i : ipv4_interfaces()) {
    if (i.loopback) {
      EXPECT_EQ(i.address >> 24, 127u) << i.name;
    }
  }
}

}  // namespace
}  // namespace ringlet::topology
