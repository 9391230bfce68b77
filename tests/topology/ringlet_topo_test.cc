// ringlet-topo as a user runs it, on the fixtures: the job table and ring it
// draws, --save-xml and RINGLET_TOPO_FILE, and the launchers it finds on PATH.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "ringlet/topology/topology.h"
#include "tests/common/job_run.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixtures = RINGLET_TOPO_FIXTURES;

ringlet::test::JobRun topo(const std::string& args, const std::string& env = "") {
  return ringlet::test::run_job(env + " " + RINGLET_TOPO + " " + args);
}

bool ok(const ringlet::test::JobRun& r) {
  return WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
}

json topo_json(const std::string& args, const std::string& env = "") {
  const auto r = topo(args + " --json", env);
  EXPECT_TRUE(ok(r)) << r.output;
  return json::parse(r.output);
}

// A directory removed at the end of the test.
struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("ringlet-topo-test-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// Two hosts of 8 GPUs: every rank on its GPU's node with 2 cores, the NIC
// behind its GPU's switch; the ring host by host.
TEST(RingletTopo, DrawsAJobOnTwoGpuHosts) {
  const json j = topo_json("--input " + kFixtures + "/gpu8.xml -H node-a:8,node-b:8");
  EXPECT_EQ(j["hosts"], json({"node-a", "node-b"}));
  EXPECT_EQ(j["ranks"], 16);
  ASSERT_EQ(j["job"].size(), 16u);
  for (int rank = 0; rank < 16; ++rank) {
    const json& row = j["job"][rank];
    SCOPED_TRACE(row.dump());
    const int local = rank % 8;
    EXPECT_EQ(row["rank"], rank);
    EXPECT_EQ(row["host"], rank < 8 ? "node-a" : "node-b");
    EXPECT_EQ(row["local_rank"], local);
    EXPECT_EQ(row["numa_node"], local / 4);
    const int c = 2 * local;
    EXPECT_EQ(row["pus"], json({c, c + 1, c + 16, c + 17}));
    EXPECT_EQ(row["gpu"], "cuda" + std::to_string(local));
    EXPECT_EQ(row["nic"], "mlx5_" + std::to_string(local / 2));
    EXPECT_EQ(row["netdevs"], json({"ib" + std::to_string(local / 2)}));
  }
  EXPECT_EQ(j["ring"], json({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(j["topology"]["hosts"][0]["hostname"], "gpu-node");
  // Each GPU's UUID (what CUDA_VISIBLE_DEVICES may name), in the JSON and the text.
  EXPECT_EQ(j["topology"]["hosts"][0]["gpus"][5]["uuid"],
            "GPU-a1b2c3d5-0000-4000-8000-000000000005");
  const auto r = topo("--input " + kFixtures + "/gpu8.xml");
  ASSERT_TRUE(ok(r)) << r.output;
  EXPECT_NE(r.output.find("    [5] cuda5  pci 0000:93:00.0  id 10de:20b0  numa 1  uuid "
                          "GPU-a1b2c3d5-0000-4000-8000-000000000005\n"),
            std::string::npos)
      << r.output;
}

// Sixteen ranks on one GPU host: ranks r and r + 8 share GPU r % 8; the ring
// takes node 0's ranks, then node 1's.
TEST(RingletTopo, RingGroupsEachNodesRanks) {
  const json j = topo_json("--input " + kFixtures + "/gpu8.xml -n 16");
  EXPECT_EQ(j["ring"], json({0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_EQ(j["job"][8]["pus"], json({4, 20}));
  EXPECT_EQ(j["job"][8]["host"], "gpu-node");
  // As text: the table's row and the ring, hosts apart.
  const auto r = topo("--xml " + kFixtures + "/two_numa.xml -H a:4,b:2");
  ASSERT_TRUE(ok(r)) << r.output;
  EXPECT_NE(r.output.find("ring: 0 2 1 3 | 4 5  ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  2     a     2      0     2 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("job: 6 rank(s) on 2 host(s)"), std::string::npos) << r.output;
}

// --save-xml writes what RINGLET_TOPO_FILE (and --input) reads back.
TEST(RingletTopo, SavedXmlIsWhatTheTopoFileReads) {
  TempDir dir;
  const std::string saved = (dir.path / "copy.xml").string();
  ASSERT_TRUE(ok(topo("--input " + kFixtures + "/gpu8.xml --save-xml " + saved)));
  EXPECT_EQ(ringlet::topology::load_hwloc_xml(saved),
            ringlet::topology::load_hwloc_xml(kFixtures + "/gpu8.xml"));
  const json j = topo_json("-n 2", "RINGLET_TOPO_FILE=" + saved);
  EXPECT_EQ(j["source"], "RINGLET_TOPO_FILE=" + saved);
  EXPECT_EQ(j["topology"]["hosts"][0]["gpus"].size(), 8u);
  // This machine's own, saved and read back.
  const std::string mine = (dir.path / "mine.xml").string();
  ASSERT_TRUE(ok(topo("--save-xml " + mine)));
  const json here = topo_json("--input " + mine);
  EXPECT_EQ(here["source"], mine);
  EXPECT_GE(here["topology"]["hosts"][0]["packages"].size(), 1u);
  // And the JSON it prints reads back as input.
  const std::string as_json = (dir.path / "t.json").string();
  std::ofstream(as_json) << topo("--input " + kFixtures + "/two_numa.xml --json").output;
  EXPECT_EQ(topo_json("--input " + as_json + " -n 4")["ring"], json({0, 2, 1, 3}));
  EXPECT_FALSE(ok(topo("--input " + as_json + " --save-xml " + mine)));
}

// The launchers are found on PATH: with fake ssh, mpirun and srun there, all
// are usable; with none, none but ringletrun itself.
TEST(RingletTopo, SaysWhichLaunchersThisMachineHas) {
  TempDir dir;
  for (const char* tool : {"ssh", "mpirun", "srun"}) {
    const fs::path p = dir.path / tool;
    std::ofstream(p) << "#!/bin/sh\n";
    fs::permissions(p, fs::perms::owner_all);
  }
  auto usable = [](const json& list, const std::string& name) {
    for (const json& c : list) {
      if (c["name"] == name) return c["usable"].get<bool>();
    }
    ADD_FAILURE() << "no " << name << " in " << list.dump();
    return false;
  };
  const std::string input = "--input " + kFixtures + "/two_numa.xml";
  json j = topo_json(input, "PATH=" + dir.path.string());
  EXPECT_TRUE(usable(j["launchers"], "ringletrun"));
  EXPECT_TRUE(usable(j["launchers"], "ringletrun -H"));
  EXPECT_TRUE(usable(j["launchers"], "ringletrun --mpi"));
  EXPECT_TRUE(usable(j["launchers"], "srun"));
  const fs::path empty = dir.path / "empty";
  fs::create_directories(empty);
  j = topo_json(input, "PATH=" + empty.string());
  EXPECT_TRUE(usable(j["launchers"], "ringletrun"));
  EXPECT_FALSE(usable(j["launchers"], "ringletrun -H"));
  EXPECT_FALSE(usable(j["launchers"], "ringletrun --mpi"));
  EXPECT_FALSE(usable(j["launchers"], "srun"));
  // RINGLET_RSH stands in for ssh.
  j = topo_json(input, "RINGLET_RSH=myrsh PATH=" + empty.string());
  EXPECT_TRUE(usable(j["launchers"], "ringletrun -H"));
  // shm and tcp are always built; ucx, where the build has UCX (its carrier
  // is built with it), runs where RINGLET_TRANSPORT names it.
  EXPECT_EQ(j["transports"][0]["name"], "shm");
  EXPECT_EQ(j["transports"][1]["name"], "tcp");
  EXPECT_EQ(j["transports"][2]["name"], "ucx");
  EXPECT_EQ(j["transports"][2]["usable"], RINGLET_TEST_UCX != 0);
  EXPECT_EQ(j["transports"][2]["detail"],
            RINGLET_TEST_UCX ? "RINGLET_TRANSPORT=ucx" : "not in this build");
}

TEST(RingletTopo, RefusesWhatItCannotDraw) {
  auto r = topo("--input " + kFixtures + "/two_numa.xml -H a:2,b:2 -n 5");
  EXPECT_FALSE(ok(r));
  EXPECT_NE(r.output.find("-np 5 needs 5 slots but the hosts give 4"), std::string::npos)
      << r.output;
  r = topo("-n 2", "RINGLET_TOPO_FILE=/nonexistent/node.xml");
  EXPECT_FALSE(ok(r));
  EXPECT_NE(r.output.find("cannot read hwloc XML '/nonexistent/node.xml'"), std::string::npos)
      << r.output;
}

}  // namespace
