// Placement in real jobs: ranks under ringletrun with RINGLET_TOPO_FILE set to
// two_numa.xml (node 0: PUs 0 and 2, node 1: PUs 1 and 3). Four ranks go
// round-robin over the nodes, so the ring is 0 2 1 3 (each node's ranks
// together) and rank r belongs on PU r. This machine binds each rank to its PU
// where it has it online, and leaves the others with an info line; the ring
// collectives must be right over the reordered ring, through shm and TCP.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ringlet/topology/affinity.h"
#include "ringlet/topology/nic_interface.h"
#include "ringlet/topology/topology.h"
#include "tests/common/job_run.h"

namespace {

using ringlet::topology::cpu_list_text;
using ringlet::topology::online_cpus;
using ringlet::topology::process_affinity;

const std::string kTwoNuma = std::string(RINGLET_TOPO_FIXTURES) + "/two_numa.xml";

struct Rank {
  std::string ring, cpus;
  bool ok = false;
};

struct Job {
  ringlet::test::JobRun run;
  std::map<int, Rank> ranks;  // by rank, from the PLACE lines
  bool exited_zero() const { return WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0; }
  int count(const std::string& text) const {
    int n = 0;
    for (size_t at = run.output.find(text); at != std::string::npos;
         at = run.output.find(text, at + 1)) {
      ++n;
    }
    return n;
  }
};

Job run(const std::string& env, int np, const std::string& wrapper = "") {
  Job j;
  j.run = ringlet::test::run_job("HOROVOD_LOG_LEVEL=info RINGLET_TIMEOUT_SECONDS=60 " + env + " " +
                                 RINGLETRUN + " -np " + std::to_string(np) + " " + wrapper + " " +
                                 PLACEMENT_RANK);
  std::istringstream lines(j.run.output);
  std::string line;
  while (std::getline(lines, line)) {
    const auto at = line.find("PLACE ");
    if (at == std::string::npos) continue;
    std::istringstream f(line.substr(at + 6));
    int rank = -1;
    std::string ring, cpus, ok;
    f >> rank >> ring >> cpus >> ok;
    j.ranks[rank] = {ring.substr(5), cpus.substr(5), ok == "ok=1"};
  }
  return j;
}

std::vector<int> intersect(std::vector<int> a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// What rank r (on PU r of two_numa.xml) ends with here: PU r where this
// machine has it online and the job may use it, else the CPUs it started with.
std::string expected_cpus(int pu, const std::vector<int>& start) {
  const std::vector<int> target = intersect(intersect({pu}, online_cpus()), start);
  return cpu_list_text(target.empty() ? start : target);
}

// The job's CPUs must not be a binding already: the fixture's CPUs online
// here must all be in the test's own affinity.
bool started_unbound() {
  const std::vector<int> here = intersect({0, 1, 2, 3}, online_cpus());
  const std::vector<int> mine = process_affinity();
  return std::includes(mine.begin(), mine.end(), here.begin(), here.end());
}

void expect_ring_and_binding(const Job& j, const std::string& ring) {
  SCOPED_TRACE(j.run.output);
  EXPECT_TRUE(j.exited_zero());
  ASSERT_EQ(j.ranks.size(), 4u);
  const std::vector<int> start = process_affinity();
  int not_here = 0;
  for (const auto& [r, rank] : j.ranks) {
    EXPECT_EQ(rank.ring, ring) << "rank " << r;
    EXPECT_TRUE(rank.ok) << "rank " << r;
    EXPECT_EQ(rank.cpus, expected_cpus(r, start)) << "rank " << r;
    const bool here = !intersect({r}, intersect(online_cpus(), start)).empty();
    not_here += !here;
    // A rank bound says where, and after which file.
    if (here && start != std::vector<int>{r}) {
      EXPECT_EQ(j.count("local rank " + std::to_string(r) + " of 4 bound to CPUs " +
                        std::to_string(r) + " (NUMA node " + std::to_string(r % 2) +
                        ") (RINGLET_TOPO_FILE=" + kTwoNuma + ")"),
                1)
          << "rank " << r;
    }
  }
  // Each rank whose PU is not here says so.
  EXPECT_EQ(j.count("none of them online here: left unbound"), not_here);
}

TEST(PlacementJob, RingFollowsNumaNodesAndRanksBindThroughShm) {
  if (!started_unbound()) GTEST_SKIP() << "this test runs bound to fewer CPUs than the machine has";
  expect_ring_and_binding(
      run("RINGLET_TOPO_FILE=" + kTwoNuma + " RINGLET_ALGORITHM=ring RINGLET_TRANSPORT=shm", 4),
      "0,2,1,3");
}

TEST(PlacementJob, RingFollowsNumaNodesOverTcp) {
  if (!started_unbound()) GTEST_SKIP() << "this test runs bound to fewer CPUs than the machine has";
  expect_ring_and_binding(
      run("RINGLET_TOPO_FILE=" + kTwoNuma + " RINGLET_ALGORITHM=ring RINGLET_TRANSPORT=tcp", 4),
      "0,2,1,3");
}

// Two simulated hosts of three ranks: on each, ranks 0 and 2 of the host on
// node 0, rank 1 on node 1; hosts stay in order.
TEST(PlacementJob, EachHostOrdersItsOwnRanks) {
  const Job j = run("RINGLET_TOPO_FILE=" + kTwoNuma + " RINGLET_ALGORITHM=ring", 6, AS_TWO_HOSTS);
  SCOPED_TRACE(j.run.output);
  EXPECT_TRUE(j.exited_zero());
  ASSERT_EQ(j.ranks.size(), 6u);
  for (const auto& [r, rank] : j.ranks) {
    EXPECT_EQ(rank.ring, "0,2,1,3,5,4") << "rank " << r;
    EXPECT_TRUE(rank.ok) << "rank " << r;
  }
}

TEST(PlacementJob, BindNoneLeavesEveryRankAndTheRingStillFollowsNothing) {
  const Job j = run("RINGLET_TOPO_FILE=" + kTwoNuma + " RINGLET_BIND=none", 4);
  SCOPED_TRACE(j.run.output);
  EXPECT_TRUE(j.exited_zero());
  ASSERT_EQ(j.ranks.size(), 4u);
  const std::string start = cpu_list_text(process_affinity());
  for (const auto& [r, rank] : j.ranks) {
    EXPECT_EQ(rank.cpus, start) << "rank " << r;
    // Unbound ranks without a GPU run anywhere: no locality, ranks ascend.
    EXPECT_EQ(rank.ring, "0,1,2,3") << "rank " << r;
  }
  EXPECT_EQ(j.count("RINGLET_BIND=none: local rank"), 4);
}

// Started bound to one CPU (as taskset or a launcher would): every rank keeps
// it, and says so.
TEST(PlacementJob, AJobStartedBoundKeepsItsBinding) {
  const std::vector<int> start = process_affinity();
  const std::vector<int> here = intersect({0, 1, 2, 3}, online_cpus());
  if (here.size() < 2 || !started_unbound()) {
    GTEST_SKIP() << "needs 2 of CPUs 0-3 online and this test unbound";
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(here.back(), &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);
  const Job j = run("RINGLET_TOPO_FILE=" + kTwoNuma, 4);
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int c : start) CPU_SET(c, &all);
  ASSERT_EQ(::sched_setaffinity(0, sizeof all, &all), 0);
  SCOPED_TRACE(j.run.output);
  EXPECT_TRUE(j.exited_zero());
  ASSERT_EQ(j.ranks.size(), 4u);
  for (const auto& [r, rank] : j.ranks) {
    EXPECT_EQ(rank.cpus, std::to_string(here.back())) << "rank " << r;
    // Bound on one node (here.back()'s), all ranks share a locality: ascending.
    EXPECT_EQ(rank.ring, "0,1,2,3") << "rank " << r;
  }
  EXPECT_EQ(j.count("was started bound to CPUs " + std::to_string(here.back())), 4);
}

// gpu8.xml's cuda4-7 are on NUMA node 1 (PUs 8-15 and 24-31, not on this
// machine). Each rank given its GPU through CUDA_VISIBLE_DEVICES (7 - local
// rank, as a launcher that hands out GPUs sets it) is placed on that GPU's
// node, not on cuda0-3's as local rank % GPUs would have it, and says how it
// derived its GPU: by CUDA's rules (no driver here, or one that does not know
// the file's GPUs), PCI order taken for CUDA's default order, a guess. A
// UUID (prefix) names its GPU by the UUIDs the file records; one the file
// does not record leaves the default, saying so.
TEST(PlacementJob, RanksFollowTheGpusCudaVisibleDevicesGives) {
  const std::string gpu8 = std::string(RINGLET_TOPO_FIXTURES) + "/gpu8.xml";
  const Job given = run("RINGLET_TOPO_FILE=" + gpu8, 4,
                        "sh -c 'CUDA_VISIBLE_DEVICES=$((7 - RINGLET_LOCAL_RANK)) exec \"$0\"'");
  {
    SCOPED_TRACE(given.run.output);
    EXPECT_TRUE(given.exited_zero());
    ASSERT_EQ(given.ranks.size(), 4u);
    for (int r = 0; r < 4; ++r) {
      const std::string rank = std::to_string(r), gpu = std::to_string(7 - r);
      EXPECT_EQ(given.count("local rank " + rank + " belongs on CPUs"), 1) << r;
      EXPECT_EQ(given.count("(NUMA node 1, GPU cuda" + gpu + ")"), 1) << r;
      EXPECT_EQ(given.count("local rank " + rank + " drives GPU cuda" + gpu + ": "), 1) << r;
      EXPECT_EQ(
          given.count("entry 0 of 1 (local rank " + rank + " % 1) of CUDA_VISIBLE_DEVICES='" + gpu +
                      "', an index in PCI bus order, taken for CUDA's fastest-first "
                      "order as the GPUs are of one model (CUDA_DEVICE_ORDER unset)"),
          1)
          << r;
      // One node, one locality: the ring ascends.
      EXPECT_EQ(given.ranks.at(r).ring, "0,1,2,3") << r;
    }
    EXPECT_EQ(given.count("; a guess"), 4);
  }
  const Job uuid = run("RINGLET_TOPO_FILE=" + gpu8 + " CUDA_VISIBLE_DEVICES=GPU-a1b2c3d6", 4);
  {
    SCOPED_TRACE(uuid.run.output);
    EXPECT_TRUE(uuid.exited_zero());
    EXPECT_EQ(uuid.count("(NUMA node 1, GPU cuda6)"), 4);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(uuid.count("local rank " + std::to_string(r) + " drives GPU cuda6: "), 1) << r;
    }
    EXPECT_EQ(uuid.count("of CUDA_VISIBLE_DEVICES='GPU-a1b2c3d6', by the topology's GPU UUIDs"), 4);
    EXPECT_EQ(uuid.count("; a guess"), 0);
  }
  const Job unknown = run("RINGLET_TOPO_FILE=" + gpu8 +
                              " CUDA_VISIBLE_DEVICES=GPU-8f1e2a3b-0000-4444-8888-123456789abc",
                          4);
  SCOPED_TRACE(unknown.run.output);
  EXPECT_TRUE(unknown.exited_zero());
  EXPECT_EQ(
      unknown.count("CUDA_VISIBLE_DEVICES='GPU-8f1e2a3b-0000-4444-8888-123456789abc' makes no "
                    "GPU of this host visible: entry 0 ('GPU-8f1e2a3b-0000-4444-8888-"
                    "123456789abc') begins no UUID the topology lists"),
      4);
  EXPECT_EQ(unknown.count("its GPU is taken as local rank % GPUs"), 4);
  // Ranks 1-3 belong on cuda1-3's cores, not here (rank 0's, PUs 0 and 1,
  // are: it runs on them and names no GPU).
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(unknown.count("(NUMA node 0, GPU cuda" + std::to_string(r) + ")"), 1) << r;
  }
}

TEST(PlacementJob, ABadTopologyFileFailsInitNamingIt) {
  const Job j = run("RINGLET_TOPO_FILE=/nonexistent/node.xml", 2);
  SCOPED_TRACE(j.run.output);
  EXPECT_FALSE(j.exited_zero());
  EXPECT_TRUE(j.ranks.empty());
  EXPECT_GE(j.count("RINGLET_TOPO_FILE='/nonexistent/node.xml' cannot be used: topology: cannot "
                    "read hwloc XML '/nonexistent/node.xml': No such file or directory"),
            1);
}

TEST(PlacementJob, ABadBindValueFailsInitNamingIt) {
  const Job j = run("RINGLET_BIND=socket", 2);
  SCOPED_TRACE(j.run.output);
  EXPECT_FALSE(j.exited_zero());
  EXPECT_GE(j.count("RINGLET_BIND='socket' is not valid: expected one of auto|none"), 1);
}

// A port free on `address` a moment ago.
int free_port(const std::string& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(*ringlet::topology::parse_ipv4(address));
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// Two ranks on two (simulated) hosts meeting at an address of one of this
// machine's NICs: the route to rank 0 goes through that NIC's interface, so
// both ranks' TCP links listen on it, and the job runs over it.
TEST(PlacementJob, TcpLinksUseTheNicThatReachesRankZero) {
  namespace topo = ringlet::topology;
  const topo::Host host = topo::discover().hosts.at(0);
  std::string netdev, address;
  for (const topo::PciDevice& nic : host.nics) {
    for (const std::string& name : nic.netdevs) {
      for (const topo::Ipv4Interface& i : topo::ipv4_interfaces()) {
        if (i.name == name && i.up && !i.loopback && address.empty()) {
          netdev = name;
          address = topo::ipv4_text(i.address);
        }
      }
    }
  }
  if (address.empty()) GTEST_SKIP() << "hwloc sees no NIC here with an IPv4 address";
  // On a host of one NUMA node every NIC is near every rank; on others the
  // NIC found may not be rank 0's nearest.
  if (host.numa_count() != 1) GTEST_SKIP() << "needs a host of one NUMA node";
  const int port = free_port(address);
  ASSERT_GT(port, 0);
  auto rank = [&](int r) {
    return "RINGLET_RANK=" + std::to_string(r) +
           " RINGLET_SIZE=2 RINGLET_SECRET=nic-test RINGLET_JOB_ID=nictest" +
           std::to_string(::getpid()) + " RINGLET_RENDEZVOUS=" + address + ":" +
           std::to_string(port) + " RINGLET_HOSTNAME=nic-host-" + std::to_string(r) +
           " HOROVOD_LOG_LEVEL=info RINGLET_TIMEOUT_SECONDS=30 " + PLACEMENT_RANK;
  };
  const auto run = ringlet::test::run_job("(" + rank(0) + " & " + rank(1) + "; wait) 2>&1");
  SCOPED_TRACE(run.output);
  const std::string used = "TCP links use NIC ";
  int lines = 0;
  for (size_t at = run.output.find(used); at != std::string::npos;
       at = run.output.find(used, at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 2);
  EXPECT_NE(run.output.find("the route to rank 0 (" + address + ") goes through " + netdev),
            std::string::npos);
  EXPECT_NE(run.output.find("PLACE 0 ring=0,1"), std::string::npos);
  EXPECT_NE(run.output.find("PLACE 1 ring=0,1"), std::string::npos);
  EXPECT_EQ(run.output.find("ok=0"), std::string::npos);
}

}  // namespace
