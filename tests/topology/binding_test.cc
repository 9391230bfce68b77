// Whether a rank binds, and to what, on the fixtures' machines and on this
// one; and binding a real process (in a child, so the test keeps its CPUs).
#include "ringlet/topology/binding.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "ringlet/topology/affinity.h"

namespace ringlet::topology {
namespace {

const std::string kFixtures = RINGLET_TOPO_FIXTURES;

std::vector<int> range(int first, int last) {
  std::vector<int> v;
  for (int i = first; i <= last; ++i) v.push_back(i);
  return v;
}

// gpu8.xml on the machine it describes (32 PUs, all online, none taken):
// each rank binds to its placement, on its GPU's node.
TEST(Binding, GpuRanksBindToTheirGpusNode) {
  const Host h = load_hwloc_xml(kFixtures + "/gpu8.xml").hosts.at(0);
  const auto placement = place_local_ranks(h, 8);
  for (int r = 0; r < 8; ++r) {
    const Binding b = plan_binding(h, placement[r], true, range(0, 31), range(0, 31));
    EXPECT_EQ(b.action, BindAction::kBind) << r;
    const int c = 2 * r;
    EXPECT_EQ(b.cpus, (std::vector<int>{c, c + 1, c + 16, c + 17})) << r;
    EXPECT_EQ(b.numa_node, r / 4) << r;
    // Every CPU of the binding is on the node of the rank's GPU.
    for (int cpu : b.cpus) EXPECT_EQ(numa_node_of(h, {cpu}), h.gpus[placement[r].gpu].numa_node);
  }
}

TEST(Binding, AProcessStartedBoundIsLeftAsItIs) {
  const Host h = load_hwloc_xml(kFixtures + "/gpu8.xml").hosts.at(0);
  const auto placement = place_local_ranks(h, 8);
  // taskset -c 12: narrower than the host; on node 1, so that is where it runs.
  Binding b = plan_binding(h, placement[0], true, {12}, range(0, 31));
  EXPECT_EQ(b.action, BindAction::kUserBound);
  EXPECT_EQ(b.numa_node, 1);
  EXPECT_TRUE(b.cpus.empty());
  // Bound across both nodes: only its GPU tells where it works.
  b = plan_binding(h, placement[5], true, {3, 12}, range(0, 31));
  EXPECT_EQ(b.action, BindAction::kUserBound);
  EXPECT_EQ(b.numa_node, 1);
}

TEST(Binding, NoneLeavesEveryRankWhereTheSystemPutsIt) {
  const Host h = load_hwloc_xml(kFixtures + "/gpu8.xml").hosts.at(0);
  const auto placement = place_local_ranks(h, 8);
  const Binding b = plan_binding(h, placement[6], false, range(0, 31), range(0, 31));
  EXPECT_EQ(b.action, BindAction::kDisabled);
  EXPECT_EQ(b.numa_node, 1);  // its GPU's
  Host cpu_only = h;
  cpu_only.gpus.clear();
  EXPECT_EQ(
      plan_binding(cpu_only, place_local_ranks(cpu_only, 2)[1], false, range(0, 31), range(0, 31))
          .numa_node,
      -1);
}

// A topology of another machine: the placement comes from it, the binding
// keeps only CPUs this one has online; with none, the rank is not bound.
TEST(Binding, AnotherMachinesTopologyBindsOnlyToCpusThatAreHere) {
  const Host h = load_hwloc_xml(kFixtures + "/two_numa.xml").hosts.at(0);
  const auto placement = place_local_ranks(h, 4);  // PUs 0, 1, 2, 3 in turn
  const std::vector<int> here = {0, 1};            // a machine of 2 CPUs
  Binding b = plan_binding(h, placement[0], true, here, here);
  EXPECT_EQ(b.action, BindAction::kBind);
  EXPECT_EQ(b.cpus, std::vector<int>{0});
  EXPECT_EQ(b.numa_node, 0);
  b = plan_binding(h, placement[1], true, here, here);
  EXPECT_EQ(b.cpus, std::vector<int>{1});
  EXPECT_EQ(b.numa_node, 1);
  b = plan_binding(h, placement[2], true, here, here);
  EXPECT_EQ(b.action, BindAction::kNotHere);
  EXPECT_EQ(b.numa_node, 0);  // the ring still follows the described machine
  // One rank owning the whole (described) machine is already everywhere it may be.
  b = plan_binding(h, place_local_ranks(h, 1)[0], true, here, here);
  EXPECT_EQ(b.action, BindAction::kEverywhere);
  // A machine of 8 CPUs with CPUs 4-7 offline, the process allowed on 0-3.
  b = plan_binding(h, placement[3], true, range(0, 3), range(0, 3));
  EXPECT_EQ(b.action, BindAction::kBind);
  EXPECT_EQ(b.cpus, std::vector<int>{3});
}

TEST(Binding, NoCoresNoBinding) {
  Placement p;
  EXPECT_EQ(plan_binding(Host{}, p, true, {0}, {0}).action, BindAction::kNoCores);
}

TEST(Affinity, CpuListsReadAndWriteAsLinuxDoes) {
  EXPECT_EQ(cpu_list_text({0, 1, 2, 3, 8, 16, 17}), "0-3,8,16-17");
  EXPECT_EQ(cpu_list_text({}), "");
  EXPECT_EQ(parse_cpu_list("0-3,8,16-17\n"), (std::vector<int>{0, 1, 2, 3, 8, 16, 17}));
  EXPECT_EQ(parse_cpu_list("5"), std::vector<int>{5});
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_FALSE(parse_cpu_list("3-1"));
  EXPECT_FALSE(parse_cpu_list("1,,2"));
  EXPECT_FALSE(parse_cpu_list("a"));
}

TEST(Affinity, ThisProcessRunsOnOnlineCpus) {
  const auto mine = process_affinity();
  const auto online = online_cpus();
  ASSERT_FALSE(mine.empty());
  for (int c : mine) EXPECT_TRUE(std::binary_search(online.begin(), online.end(), c)) << c;
}

// In a child: a thread started before the binding is bound too.
TEST(Affinity, BindProcessBindsEveryThread) {
  const int cpu = process_affinity().back();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::atomic<pid_t> tid{0};
    std::atomic<bool> stop{false};
    std::thread t([&] {
      tid = static_cast<pid_t>(::syscall(SYS_gettid));
      while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (tid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    bool ok = true;
    try {
      bind_process({cpu});
      cpu_set_t set;
      CPU_ZERO(&set);
      ok = ::sched_getaffinity(tid, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1 &&
           CPU_ISSET(cpu, &set) && process_affinity() == std::vector<int>{cpu};
    } catch (...) {
      ok = false;
    }
    stop = true;
    t.join();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's threads were not all bound";
}

}  // namespace
}  // namespace ringlet::topology
