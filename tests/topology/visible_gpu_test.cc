// CUDA_VISIBLE_DEVICES read as CUDA reads it, against gpu8.xml (cuda0-3 on
// NUMA node 0, cuda4-7 on node 1, in PCI bus order), and a placement that
// follows the GPUs it names.
#include "ringlet/topology/visible_gpu.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringlet/topology/placement.h"

namespace ringlet::topology {
namespace {

Host gpu8() { return load_hwloc_xml(std::string(RINGLET_TOPO_FIXTURES) + "/gpu8.xml").hosts.at(0); }

int gpu_of(const Host& h, const std::string& visible, int local_rank) {
  return visible_gpu(h, visible, local_rank).gpu;
}

TEST(VisibleGpu, AListOfOneIsThatGpuForAnyLocalRank) {
  const Host h = gpu8();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(gpu_of(h, "5", r), 5) << r;
    EXPECT_EQ(h.gpus[static_cast<size_t>(gpu_of(h, "5", r))].name, "cuda5");
  }
}

TEST(VisibleGpu, ALongerListIsTakenByLocalRank) {
  const Host h = gpu8();
  EXPECT_EQ(gpu_of(h, "6,7", 0), 6);
  EXPECT_EQ(gpu_of(h, "6,7", 1), 7);
  EXPECT_EQ(gpu_of(h, "6,7", 2), 6);
  EXPECT_EQ(gpu_of(h, " 3 , 1 ", 1), 1);
}

TEST(VisibleGpu, TheListEndsAtTheFirstEntryCudaWouldNotTake) {
  const Host h = gpu8();
  // CUDA stops reading at an index it does not have, or at a word.
  EXPECT_EQ(gpu_of(h, "2,9,4", 1), 2);
  EXPECT_EQ(gpu_of(h, "2,x,4", 1), 2);
  EXPECT_EQ(gpu_of(h, "1,-1,4", 1), 1);
}

TEST(VisibleGpu, NoVisibleGpuOrUuidsSaySo) {
  const Host h = gpu8();
  for (const std::string hidden : {"-1", "", "8", "none"}) {
    const VisibleGpu v = visible_gpu(h, hidden, 0);
    EXPECT_EQ(v.gpu, -1) << hidden;
    EXPECT_NE(v.reason.find("makes no GPU of this host visible"), std::string::npos) << v.reason;
  }
  const VisibleGpu uuid = visible_gpu(h, "GPU-8f1e2a3b-0000-4444-8888-123456789abc", 0);
  EXPECT_EQ(uuid.gpu, -1);
  EXPECT_NE(uuid.reason.find("by UUID"), std::string::npos) << uuid.reason;
  EXPECT_NE(visible_gpu(Host{}, "0", 0).reason.find("lists no GPU"), std::string::npos);
}

// Two local ranks given cuda4 and cuda6 (node 1) by their launcher: both run
// on node 1, its cores split between them, each with the NIC behind its
// GPU's switch, where the default rule would have put them on node 0.
TEST(VisibleGpu, PlacementFollowsTheGivenGpus) {
  const Host h = gpu8();
  const auto given = place_local_ranks(h, 2, {4, 6});
  ASSERT_EQ(given.size(), 2u);
  EXPECT_EQ(given[0].gpu, 4);
  EXPECT_EQ(given[1].gpu, 6);
  for (const Placement& p : given) {
    EXPECT_EQ(p.numa_node, 1) << p.local_rank;
    EXPECT_EQ(p.cores.size(), 4u) << p.local_rank;
  }
  EXPECT_EQ(given[0].cores, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(given[1].cores, (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(h.nics.at(static_cast<size_t>(given[0].nic)).name, "mlx5_2");
  EXPECT_EQ(h.nics.at(static_cast<size_t>(given[1].nic)).name, "mlx5_3");
  // -1 (no word from CUDA_VISIBLE_DEVICES) keeps the default, rank % GPUs.
  const auto mixed = place_local_ranks(h, 2, {-1, 7});
  EXPECT_EQ(mixed[0].gpu, 0);
  EXPECT_EQ(mixed[0].numa_node, 0);
  EXPECT_EQ(mixed[1].gpu, 7);
  EXPECT_EQ(mixed[1].numa_node, 1);
}

}  // namespace
}  // namespace ringlet::topology
