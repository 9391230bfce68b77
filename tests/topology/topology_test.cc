#include "ringlet/topology/topology.h"

#include <gtest/gtest.h>
#include <hwloc.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ringlet/common/failure.h"
#include "ringlet/topology/placement.h"

namespace ringlet::topology {
namespace {

// A temporary file removed at the end of the test.
struct TempFile {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("ringlet-topo-" + std::to_string(::getpid()) + "-" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".xml"))
                         .string();
  ~TempFile() { std::remove(path.c_str()); }
};

// hwloc can invent machines ("package:2 numa:1 core:4 pu:2"); export one as XML.
void write_synthetic_xml(const std::string& description, const std::string& path) {
  hwloc_topology_t t = nullptr;
  ASSERT_EQ(hwloc_topology_init(&t), 0);
  ASSERT_EQ(hwloc_topology_set_synthetic(t, description.c_str()), 0);
  ASSERT_EQ(hwloc_topology_load(t), 0);
  ASSERT_EQ(hwloc_topology_export_xml(t, path.c_str(), 0), 0);
  hwloc_topology_destroy(t);
}

TEST(Topology, DiscoverFindsThisMachine) {
  const Topology t = discover();
  ASSERT_EQ(t.hosts.size(), 1u);
  const Host& h = t.hosts[0];
  EXPECT_GE(h.core_count(), 1);
  EXPECT_GE(h.numa_count(), 1);
  EXPECT_FALSE(h.hostname.empty());
  for (const auto& p : h.packages) {
    for (const auto& n : p.numa_nodes) {
      for (const auto& c : n.cores) EXPECT_FALSE(c.pus.empty()) << "core " << c.index;
    }
  }
}

TEST(Topology, JsonRoundTrip) {
  const Topology t = discover();
  const nlohmann::json j = t;
  EXPECT_EQ(j.get<Topology>(), t);
  // Through text too, as a file would carry it.
  EXPECT_EQ(nlohmann::json::parse(j.dump()).get<Topology>(), t);
}

TEST(Topology, SavedXmlReloadsToTheSameMachine) {
  TempFile file;
  save_hwloc_xml(file.path);
  Topology loaded = load_hwloc_xml(file.path);
  Topology here = discover();
  ASSERT_EQ(loaded.hosts.size(), 1u);
  // hwloc records the host name in the XML; the rest must match exactly.
  loaded.hosts[0].hostname = here.hosts[0].hostname;
  EXPECT_EQ(loaded, here);
}

// The file is the caller's argument: a bad one is an invalid argument, and
// the message says what was wrong with it (not an errno hwloc left behind).
TEST(Topology, MissingXmlIsAnInvalidArgumentNamingTheFile) {
  try {
    load_hwloc_xml("/nonexistent/ringlet.xml");
    FAIL() << "loaded a missing file";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kInvalidArgument) << e.what();
    EXPECT_EQ(e.cause(),
              "topology: cannot read hwloc XML '/nonexistent/ringlet.xml': No such file or "
              "directory");
  }
  try {
    save_hwloc_xml("/nonexistent/dir/ringlet.xml");
    FAIL() << "wrote into a missing directory";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kInvalidArgument) << e.what();
    EXPECT_EQ(e.cause(),
              "topology: cannot write hwloc XML to '/nonexistent/dir/ringlet.xml': No such file "
              "or directory");
  }
  TempFile file;
  {
    std::FILE* f = std::fopen(file.path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not XML", f);
    std::fclose(f);
  }
  try {
    load_hwloc_xml(file.path);
    FAIL() << "loaded a file that is not XML";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kInvalidArgument) << e.what();
    EXPECT_NE(e.cause().find("'" + file.path + "' is not"), std::string::npos) << e.what();
  }
}

TEST(Topology, TwoSocketMachineFromXml) {
  TempFile file;
  write_synthetic_xml("package:2 numa:1 core:4 pu:2", file.path);
  const Topology t = load_hwloc_xml(file.path);
  ASSERT_EQ(t.hosts.size(), 1u);
  const Host& h = t.hosts[0];
  ASSERT_EQ(h.packages.size(), 2u);
  EXPECT_EQ(h.numa_count(), 2);
  EXPECT_EQ(h.core_count(), 8);
  EXPECT_EQ(h.packages[1].numa_nodes[0].cores[0].pus.size(), 2u);

  // Four ranks alternate sockets, then take the next core of each.
  const auto placement = place_local_ranks(h, 4);
  ASSERT_EQ(placement.size(), 4u);
  EXPECT_EQ(placement[0].numa_node, h.packages[0].numa_nodes[0].os_index);
  EXPECT_EQ(placement[1].numa_node, h.packages[1].numa_nodes[0].os_index);
  EXPECT_EQ(placement[2].numa_node, placement[0].numa_node);
  // Two ranks on a node of 4 cores: 2 cores each, in order.
  EXPECT_EQ(placement[0].cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(placement[2].cores, (std::vector<int>{2, 3}));
}

// A machine described as data: 2 NUMA nodes, 2 GPUs on node 1 and 0, one NIC per node.
TEST(Topology, GpusPullRanksToTheirNumaNode) {
  const nlohmann::json j = nlohmann::json::parse(R"({"hosts": [{
    "hostname": "dgx",
    "packages": [
      {"os_index": 0, "numa_nodes": [{"os_index": 0, "cores": [{"index": 0, "pus": [0]}, {"index": 1, "pus": [1]}]}]},
      {"os_index": 1, "numa_nodes": [{"os_index": 1, "cores": [{"index": 2, "pus": [2]}, {"index": 3, "pus": [3]}]}]}],
    "gpus": [{"kind": "gpu", "name": "cuda0", "bus_id": "0000:c1:00.0", "numa_node": 1},
             {"kind": "gpu", "name": "cuda1", "bus_id": "0000:41:00.0", "numa_node": 0}],
    "nics": [{"kind": "nic", "name": "mlx5_0", "numa_node": 0},
             {"kind": "nic", "name": "mlx5_1", "numa_node": 1}]}]})");
  const Topology t = j.get<Topology>();
  const auto p = place_local_ranks(t.hosts[0], 4);
  EXPECT_EQ(p[0].gpu, 0);
  EXPECT_EQ(p[0].numa_node, 1);
  EXPECT_EQ(p[0].cores, std::vector<int>{2});
  EXPECT_EQ(p[0].nic, 1);
  EXPECT_EQ(p[1].gpu, 1);
  EXPECT_EQ(p[1].numa_node, 0);
  EXPECT_EQ(p[1].cores, std::vector<int>{0});
  EXPECT_EQ(p[1].nic, 0);
  EXPECT_EQ(p[2].gpu, 0);
  EXPECT_EQ(p[2].cores, std::vector<int>{3});  // next core of GPU 0's node
  EXPECT_EQ(nlohmann::json(t).get<Topology>(), t);
}

TEST(Topology, EmptyHostPlacesNothingOnACore) {
  const auto p = place_local_ranks(Host{}, 2);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_TRUE(p[0].cores.empty());
  EXPECT_EQ(p[1].nic, -1);
}

}  // namespace
}  // namespace ringlet::topology
