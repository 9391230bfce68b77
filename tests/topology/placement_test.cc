// Placement, ring order and NIC choice on the machines of fixtures/ (hwloc 2
// XML written by make_fixtures.py) and on small machines described as data.
// Every expectation is worked out by hand from the machine's layout, written
// beside it.
#include "ringlet/topology/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ringlet/topology/topology.h"

namespace ringlet::topology {
namespace {

const std::string kFixtures = RINGLET_TOPO_FIXTURES;

// gpu8.xml: package p has NUMA node p and cores 8p..8p+7 (logical), core c
// with PUs c and c + 16; GPUs cuda0-3 on node 0, cuda4-7 on node 1; per pair
// of GPUs a switch with one NIC (mlx5_0: cuda0,1; mlx5_1: cuda2,3; mlx5_2:
// cuda4,5; mlx5_3: cuda6,7); eno1 on node 0 on a host bridge of its own.
Host gpu8() { return load_hwloc_xml(kFixtures + "/gpu8.xml").hosts.at(0); }
// two_numa.xml: node 0 has cores 0 and 1 (PUs 0 and 2), node 1 has cores 2
// and 3 (PUs 1 and 3).
Host two_numa() { return load_hwloc_xml(kFixtures + "/two_numa.xml").hosts.at(0); }

std::string nic_name(const Host& h, const Placement& p) {
  return p.nic < 0 ? "" : h.nics.at(p.nic).name;
}

std::vector<int> pus_of_core(int c) { return {c, c + 16}; }

std::vector<int> ring_of(const Host& h, const std::vector<Placement>& placement) {
  std::vector<int> ranks, locality;
  for (const Placement& p : placement) {
    ranks.push_back(p.local_rank);
    locality.push_back(ring_locality(h, p.numa_node));
  }
  return ring_order({ranks}, locality);
}

TEST(Fixture, Gpu8ReadsAsDrawn) {
  const Host h = gpu8();
  EXPECT_EQ(h.hostname, "gpu-node");
  ASSERT_EQ(h.packages.size(), 2u);
  EXPECT_EQ(h.numa_count(), 2);
  EXPECT_EQ(h.core_count(), 16);
  EXPECT_EQ(h.packages[1].last_level_cache_bytes, 32u << 20);
  ASSERT_EQ(h.gpus.size(), 8u);
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(h.gpus[g].name, "cuda" + std::to_string(g));
    EXPECT_EQ(h.gpus[g].numa_node, g / 4) << g;
  }
  ASSERT_EQ(h.nics.size(), 5u);
  int rdma = 0;
  for (const PciDevice& n : h.nics) {
    if (n.name == "eno1") {
      EXPECT_FALSE(n.rdma);
      EXPECT_EQ(n.netdevs, std::vector<std::string>{"eno1"});
      EXPECT_EQ(n.numa_node, 0);
      EXPECT_EQ(n.pci_path, std::vector<std::string>{"host:0000:05"});
      continue;
    }
    ++rdma;
    EXPECT_TRUE(n.rdma) << n.name;
    const int i = n.name.back() - '0';
    EXPECT_EQ(n.name, "mlx5_" + std::to_string(i));
    EXPECT_EQ(n.netdevs, std::vector<std::string>{"ib" + std::to_string(i)});
    EXPECT_EQ(n.numa_node, i / 2) << n.name;
  }
  EXPECT_EQ(rdma, 4);
  // cuda2 sits behind the second switch of package 0: host bridge, the
  // switch's upstream port, its downstream port.
  EXPECT_EQ(h.gpus[2].pci_path,
            (std::vector<std::string>{"host:0000:10", "0000:10:01.0", "0000:21:00.0"}));
  EXPECT_EQ(h.numa_distance(0, 1), 21);
  EXPECT_EQ(h.numa_distance(1, 1), 10);
}

// One rank per GPU: each on its GPU's node with 2 of the node's 8 cores, in
// order, and the NIC behind its GPU's switch.
TEST(Placement, EightGpuRanksTakeTheirGpusNodeAndSwitch) {
  const Host h = gpu8();
  const auto p = place_local_ranks(h, 8);
  ASSERT_EQ(p.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    SCOPED_TRACE("local rank " + std::to_string(r));
    EXPECT_EQ(p[r].gpu, r);
    EXPECT_EQ(p[r].numa_node, r / 4);
    const int first = 2 * r;  // node 0: cores 0..7 for ranks 0..3; node 1: 8..15 for 4..7
    EXPECT_EQ(p[r].cores, (std::vector<int>{first, first + 1}));
    EXPECT_EQ(p[r].pus, (std::vector<int>{first, first + 1, first + 16, first + 17}));
    EXPECT_FALSE(p[r].shared);
    EXPECT_EQ(nic_name(h, p[r]), "mlx5_" + std::to_string(r / 2));
  }
  EXPECT_EQ(ring_of(h, p), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// Two ranks per GPU: ranks r and r + 8 share GPU r % 8, so node 0 holds ranks
// 0-3 and 8-11, one core each, and the ring visits node 0's ranks, then node 1's.
TEST(Placement, SixteenRanksGroupTheRingByNode) {
  const Host h = gpu8();
  const auto p = place_local_ranks(h, 16);
  const std::vector<int> node0 = {0, 1, 2, 3, 8, 9, 10, 11};
  for (size_t i = 0; i < node0.size(); ++i) {
    const Placement& q = p[node0[i]];
    EXPECT_EQ(q.numa_node, 0) << node0[i];
    EXPECT_EQ(q.cores, std::vector<int>{static_cast<int>(i)}) << node0[i];
    EXPECT_EQ(q.pus, pus_of_core(static_cast<int>(i))) << node0[i];
    EXPECT_EQ(nic_name(h, q), "mlx5_" + std::to_string(q.gpu / 2)) << node0[i];
  }
  EXPECT_EQ(p[12].numa_node, 1);
  EXPECT_EQ(p[12].cores, std::vector<int>{12});  // node 1's 5th rank: core 8 + 4
  EXPECT_EQ(ring_of(h, p),
            (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15}));
}

// 32 ranks on 32 PUs: two per core, each with a hyperthread of its own.
TEST(Placement, TwoRanksPerCoreTakeOnePuEach) {
  const Host h = gpu8();
  const auto p = place_local_ranks(h, 32);
  // Node 0's ranks ascending: r % 8 in 0..3: 0,1,2,3,8,9,10,11,16,...; the
  // first two share core 0.
  EXPECT_EQ(p[0].cores, std::vector<int>{0});
  EXPECT_EQ(p[0].pus, std::vector<int>{0});
  EXPECT_EQ(p[1].cores, std::vector<int>{0});
  EXPECT_EQ(p[1].pus, std::vector<int>{16});
  EXPECT_EQ(p[2].pus, std::vector<int>{1});
  EXPECT_EQ(p[27].cores, std::vector<int>{7});  // node 0's 16th rank
  EXPECT_EQ(p[27].pus, std::vector<int>{23});
  for (const Placement& q : p) EXPECT_FALSE(q.shared) << q.local_rank;
  // No two ranks on one PU.
  std::vector<int> all;
  for (const Placement& q : p) all.insert(all.end(), q.pus.begin(), q.pus.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  EXPECT_EQ(all.size(), 32u);
}

// 48 ranks on 32 PUs: 24 on each node of 16 PUs; pinned to PUs, some would
// get half of one and others a whole one, so each may run on its whole node.
TEST(Placement, MoreRanksThanPusShareTheirNode) {
  const Host h = gpu8();
  const auto p = place_local_ranks(h, 48);
  std::vector<int> node0_pus, node1_pus;
  for (int c = 0; c < 8; ++c) {
    node0_pus.push_back(c);
    node1_pus.push_back(c + 8);
  }
  for (int c = 0; c < 8; ++c) node0_pus.push_back(c + 16);
  for (int c = 0; c < 8; ++c) node1_pus.push_back(c + 24);
  for (const Placement& q : p) {
    EXPECT_TRUE(q.shared) << q.local_rank;
    EXPECT_EQ(q.numa_node, q.gpu / 4) << q.local_rank;
    EXPECT_EQ(q.pus, q.numa_node == 0 ? node0_pus : node1_pus) << q.local_rank;
    EXPECT_EQ(q.cores.size(), 8u) << q.local_rank;
  }
}

// Without GPUs ranks alternate between nodes; the ring keeps each node's ranks together.
TEST(Placement, CpuRanksRoundRobinOverNodes) {
  const Host h = two_numa();
  const auto p = place_local_ranks(h, 4);
  EXPECT_EQ(p[0].numa_node, 0);
  EXPECT_EQ(p[0].pus, std::vector<int>{0});
  EXPECT_EQ(p[1].numa_node, 1);
  EXPECT_EQ(p[1].pus, std::vector<int>{1});
  EXPECT_EQ(p[2].numa_node, 0);
  EXPECT_EQ(p[2].pus, std::vector<int>{2});
  EXPECT_EQ(p[3].numa_node, 1);
  EXPECT_EQ(p[3].pus, std::vector<int>{3});
  for (const Placement& q : p) {
    EXPECT_EQ(q.gpu, -1);
    EXPECT_EQ(q.nic, -1);
  }
  EXPECT_EQ(ring_of(h, p), (std::vector<int>{0, 2, 1, 3}));
  // Two ranks: a node each, both of its cores; the ring stays 0 1.
  const auto two = place_local_ranks(h, 2);
  EXPECT_EQ(two[0].pus, (std::vector<int>{0, 2}));
  EXPECT_EQ(two[1].pus, (std::vector<int>{1, 3}));
  EXPECT_EQ(ring_of(h, two), (std::vector<int>{0, 1}));
}

TEST(Placement, FewerRanksThanNodesTakeWholeNodes) {
  const auto p = place_local_ranks(two_numa(), 1);
  EXPECT_EQ(p[0].pus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p[0].cores, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p[0].numa_node, -1);  // it spans both
}

// 6 ranks on 4 single-PU cores: each node has ranks 0,2,4 (or 1,3,5) on 2
// PUs; they share the node.
TEST(Placement, OversubscribedRanksShareTheirNode) {
  const Host h = two_numa();
  const auto p = place_local_ranks(h, 6);
  for (int r : {0, 2, 4}) {
    EXPECT_EQ(p[r].pus, (std::vector<int>{0, 2})) << r;
    EXPECT_TRUE(p[r].shared) << r;
  }
  for (int r : {1, 3, 5}) EXPECT_EQ(p[r].pus, (std::vector<int>{1, 3})) << r;
  EXPECT_EQ(ring_of(h, p), (std::vector<int>{0, 2, 4, 1, 3, 5}));
}

// Three ranks on a node of 2 cores with 2 PUs each: a PU block each, in core
// order (PUs 0, 16 of core 0; 1, 17 of core 1).
TEST(Placement, MoreRanksThanCoresTakeBlocksOfPus) {
  Host h;
  h.packages = {{0, 0, {{0, 0, {{0, {0, 16}}, {1, {1, 17}}}}}}};
  const auto p = place_local_ranks(h, 3);
  EXPECT_EQ(p[0].pus, (std::vector<int>{0, 16}));
  EXPECT_EQ(p[0].cores, std::vector<int>{0});
  EXPECT_EQ(p[1].pus, std::vector<int>{1});
  EXPECT_EQ(p[2].pus, std::vector<int>{17});
  EXPECT_EQ(p[2].cores, std::vector<int>{1});
  for (const Placement& q : p) EXPECT_FALSE(q.shared);
}

// A machine as data: four GPUs, all on node 0, which has 2 single-PU cores;
// node 1 has 2 more. The third and fourth rank would share node 0's PUs
// while node 1's are idle, so they move there.
Host gpus_on_one_node() {
  Host h;
  h.hostname = "lopsided";
  h.packages = {{0, 0, {{0, 0, {{0, {0}}, {1, {1}}}}}}, {1, 0, {{1, 0, {{2, {2}}, {3, {3}}}}}}};
  for (int g = 0; g < 4; ++g) {
    PciDevice d;
    d.name = "cuda" + std::to_string(g);
    d.numa_node = 0;
    h.gpus.push_back(d);
  }
  return h;
}

TEST(Placement, RanksOverflowingAGpuNodeMoveWhereThereIsRoom) {
  const Host h = gpus_on_one_node();
  const auto p = place_local_ranks(h, 4);
  EXPECT_EQ(p[0].pus, std::vector<int>{0});
  EXPECT_EQ(p[1].pus, std::vector<int>{1});
  EXPECT_EQ(p[2].numa_node, 1);
  EXPECT_EQ(p[2].pus, std::vector<int>{2});
  EXPECT_EQ(p[3].pus, std::vector<int>{3});
  EXPECT_EQ(p[3].gpu, 3);  // the GPU stays the rank's own
  // Eight ranks need two per PU anyway: each node carries four, and the
  // GPU's node keeps the first four.
  const auto eight = place_local_ranks(h, 8);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(eight[r].numa_node, 0) << r;
  for (int r = 4; r < 8; ++r) EXPECT_EQ(eight[r].numa_node, 1) << r;
}

// Four NUMA nodes, two per package, numbered across packages (0 and 2 on
// package 0): the ring goes 0, 2, then to package 1: 1, 3.
TEST(Placement, RingVisitsNodesNearestFirst) {
  Host h;
  auto node = [](int os, int core) { return NumaNode{os, 0, {{core, {core}}}}; };
  h.packages = {{0, 0, {node(0, 0), node(2, 1)}}, {1, 0, {node(1, 2), node(3, 3)}}};
  EXPECT_EQ(numa_ring_order(h), (std::vector<int>{0, 2, 1, 3}));
  // With distances, they decide: here node 3 is nearer to 0 than 2 is.
  h.numa_order = {0, 1, 2, 3};
  h.numa_distances = {10, 30, 20, 12,  //
                      30, 10, 12, 20,  //
                      20, 12, 10, 30,  //
                      12, 20, 30, 10};
  EXPECT_EQ(numa_ring_order(h), (std::vector<int>{0, 3, 1, 2}));
  EXPECT_EQ(ring_locality(h, 1), 2);
  EXPECT_EQ(ring_locality(h, 7), -1);
  EXPECT_EQ(ring_locality(h, -1), -1);
}

TEST(Placement, NumaNodeOfCpus) {
  const Host h = two_numa();
  EXPECT_EQ(numa_node_of(h, {2}), 0);
  EXPECT_EQ(numa_node_of(h, {1, 3}), 1);
  EXPECT_EQ(numa_node_of(h, {0, 1}), -1);
  EXPECT_EQ(numa_node_of(h, {}), -1);
  EXPECT_EQ(numa_node_of(h, {9}), -1);
}

// Hosts stay together in the order given; within each, locality orders the
// ranks (unknown first), rank order breaks ties.
TEST(Ring, OrdersEachHostByLocality) {
  EXPECT_EQ(ring_order({{0, 2}, {1, 3, 4}}, {1, 0, 0, -1, 1}), (std::vector<int>{2, 0, 3, 1, 4}));
  EXPECT_EQ(ring_order({{0, 1, 2, 3}, {4, 5, 6, 7}}, {}),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(ring_order({{0, 1, 2, 3}, {4, 5, 6, 7}}, {0, 1, 0, 1, 0, 1, 0, 1}),
            (std::vector<int>{0, 2, 1, 3, 4, 6, 5, 7}));
}

// Without a GPU, a rank takes a NIC on its own node; ranks with equally close
// NICs take turns, RDMA-capable ones first.
TEST(Placement, CpuRanksTakeTurnsOnTheirNodesNics) {
  Host h = gpu8();
  h.gpus.clear();
  const auto p = place_local_ranks(h, 8);
  // Ranks 0, 2, 4, 6 are on node 0 (mlx5_0, mlx5_1 and eno1; eno1 has no RDMA).
  EXPECT_EQ(nic_name(h, p[0]), "mlx5_0");
  EXPECT_EQ(nic_name(h, p[2]), "mlx5_1");
  EXPECT_EQ(nic_name(h, p[4]), "mlx5_0");
  EXPECT_EQ(nic_name(h, p[1]), "mlx5_2");
  EXPECT_EQ(nic_name(h, p[3]), "mlx5_3");
  // A NIC on no node of the rank is no choice at all.
  Host far = two_numa();
  PciDevice nic;
  nic.kind = DeviceKind::kNic;
  nic.name = "eth9";
  nic.numa_node = 1;
  far.nics.push_back(nic);
  const auto q = place_local_ranks(far, 2);
  EXPECT_EQ(q[0].nic, -1);
  EXPECT_EQ(q[1].nic, 0);
}

TEST(Placement, JsonKeepsTheNewFields) {
  const Topology t = load_hwloc_xml(kFixtures + "/gpu8.xml");
  const nlohmann::json j = t;
  EXPECT_EQ(j.get<Topology>(), t);
  EXPECT_EQ(j["hosts"][0]["nics"][0]["netdevs"][0], "ib0");
}

}  // namespace
}  // namespace ringlet::topology
