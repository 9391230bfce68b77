// Which GPU a rank drives, against gpu8.xml (cuda0-3 on NUMA node 0, cuda4-7
// on node 1, in PCI bus order: 12, 13, 22, 23, 92, 93, a2, a3; UUIDs
// GPU-a1b2c3d<i>-0000-4000-8000-00000000000<i>): as the CUDA driver reports
// it, else by CUDA's rules for CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER;
// and a placement that follows the GPUs it names.
#include "ringlet/topology/visible_gpu.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringlet/topology/cuda_driver.h"
#include "ringlet/topology/placement.h"

namespace ringlet::topology {
namespace {

Host gpu8() { return load_hwloc_xml(std::string(RINGLET_TOPO_FIXTURES) + "/gpu8.xml").hosts.at(0); }

std::string uuid(int i) {
  return "GPU-a1b2c3d" + std::to_string(i) + "-0000-4000-8000-00000000000" + std::to_string(i);
}

const std::optional<std::vector<CudaDevice>> kNoDriver;

CudaSettings pci_order(std::optional<std::string> visible) {
  return {std::move(visible), "PCI_BUS_ID"};
}

CudaSettings default_order(std::optional<std::string> visible) { return {std::move(visible), {}}; }

int gpu_of(const Host& h, const CudaSettings& cuda, int local_rank) {
  return visible_gpu(h, cuda, kNoDriver, local_rank).gpu;
}

bool says(const VisibleGpu& v, const std::string& text) {
  return v.how.find(text) != std::string::npos;
}

TEST(VisibleGpu, TheFixtureRecordsEachGpusUuid) {
  const Host h = gpu8();
  ASSERT_EQ(h.gpus.size(), 8u);
  for (int g = 0; g < 8; ++g) EXPECT_EQ(h.gpus[static_cast<size_t>(g)].uuid, uuid(g)) << g;
}

TEST(VisibleGpu, UnsetEachRankDrivesLocalRankModuloTheGpusInCudasOrder) {
  const Host h = gpu8();
  for (int r = 0; r < 10; ++r) {
    const VisibleGpu v = visible_gpu(h, pci_order(std::nullopt), kNoDriver, r);
    EXPECT_EQ(v.gpu, r % 8) << r;
    EXPECT_FALSE(v.guessed) << v.how;
    EXPECT_TRUE(says(v, "CUDA device " + std::to_string(r % 8) + " of 8 (local rank " +
                            std::to_string(r) +
                            " % 8) in PCI bus order "
                            "(CUDA_DEVICE_ORDER=PCI_BUS_ID)"))
        << v.how;
  }
}

TEST(VisibleGpu, FastestFirstWithoutTheDriverIsAGuess) {
  Host h = gpu8();
  // Unset, FASTEST_FIRST and a value CUDA does not know all mean its
  // default; for GPUs of one model, taken as PCI order.
  for (const std::optional<std::string>& order :
       {std::optional<std::string>(), std::optional<std::string>("FASTEST_FIRST"),
        std::optional<std::string>("pci_bus_id")}) {
    const VisibleGpu v = visible_gpu(h, {std::nullopt, order}, kNoDriver, 3);
    EXPECT_EQ(v.gpu, 3);
    EXPECT_TRUE(v.guessed) << v.how;
    EXPECT_TRUE(says(v, "taken for CUDA's fastest-first order as the GPUs are of one model"))
        << v.how;
  }
  EXPECT_TRUE(says(visible_gpu(h, {std::nullopt, "pci_bus_id"}, kNoDriver, 0),
                   "CUDA_DEVICE_ORDER='pci_bus_id', a value CUDA does not know"));
  EXPECT_TRUE(
      says(visible_gpu(h, default_order(std::nullopt), kNoDriver, 0), "(CUDA_DEVICE_ORDER unset)"));
  // Two models: CUDA's order may differ from PCI's, and the line says so.
  for (int g = 4; g < 8; ++g) h.gpus[static_cast<size_t>(g)].device_id = 0x2330;
  const VisibleGpu mixed = visible_gpu(h, default_order("1"), kNoDriver, 0);
  EXPECT_EQ(mixed.gpu, 1);
  EXPECT_TRUE(mixed.guessed);
  EXPECT_TRUE(says(mixed, "though CUDA numbers the fastest first and the GPUs are of 2 models"))
      << mixed.how;
}

TEST(VisibleGpu, AListOfOneIsThatGpuForAnyLocalRank) {
  const Host h = gpu8();
  for (int r = 0; r < 4; ++r) {
    const VisibleGpu v = visible_gpu(h, pci_order("5"), kNoDriver, r);
    EXPECT_EQ(v.gpu, 5) << r;
    EXPECT_EQ(h.gpus[static_cast<size_t>(v.gpu)].name, "cuda5");
    EXPECT_FALSE(v.guessed);
    EXPECT_TRUE(says(v, "entry 0 of 1 (local rank " + std::to_string(r) +
                            " % 1) of CUDA_VISIBLE_DEVICES='5', an index in PCI bus order"))
        << v.how;
  }
  EXPECT_TRUE(visible_gpu(h, default_order("5"), kNoDriver, 0).guessed);
}

TEST(VisibleGpu, ALongerListIsTakenByLocalRank) {
  const Host h = gpu8();
  EXPECT_EQ(gpu_of(h, pci_order("6,7"), 0), 6);
  EXPECT_EQ(gpu_of(h, pci_order("6,7"), 1), 7);
  EXPECT_EQ(gpu_of(h, pci_order("6,7"), 2), 6);
  EXPECT_EQ(gpu_of(h, pci_order(" 3 , 1 "), 1), 1);
  // An index is read as strtoul reads it: its leading digits.
  EXPECT_EQ(gpu_of(h, pci_order("2x,4"), 1), 4);
  EXPECT_EQ(gpu_of(h, pci_order("+3"), 0), 3);
}

TEST(VisibleGpu, TheListEndsAtTheFirstEntryCudaWouldNotTake) {
  const Host h = gpu8();
  // An index the host does not have, a word, a negative number.
  EXPECT_EQ(gpu_of(h, pci_order("2,9,4"), 1), 2);
  EXPECT_EQ(gpu_of(h, pci_order("2,x,4"), 1), 2);
  EXPECT_EQ(gpu_of(h, pci_order("1,-1,4"), 1), 1);
  EXPECT_EQ(gpu_of(h, pci_order("1,,4"), 1), 1);
  const VisibleGpu v = visible_gpu(h, pci_order("2,9,4"), kNoDriver, 1);
  EXPECT_TRUE(says(v,
                   "CUDA reads no further than entry 1 ('9') is not an index of the host's 8 "
                   "GPUs"))
      << v.how;
  // An entry of another kind ends an index list, and an index a UUID list.
  EXPECT_EQ(gpu_of(h, pci_order("3,GPU-a1b2c3d5"), 1), 3);
  const VisibleGpu uuids = visible_gpu(h, pci_order("GPU-a1b2c3d5,3"), kNoDriver, 1);
  EXPECT_EQ(uuids.gpu, 5);
  EXPECT_TRUE(says(uuids, "entry 1 ('3') is not a GPU UUID")) << uuids.how;
}

TEST(VisibleGpu, NoVisibleGpuSaysSo) {
  const Host h = gpu8();
  for (const std::string hidden : {"-1", "", "8", "none", " "}) {
    const VisibleGpu v = visible_gpu(h, pci_order(hidden), kNoDriver, 0);
    EXPECT_EQ(v.gpu, -1) << hidden;
    EXPECT_TRUE(says(v, "CUDA_VISIBLE_DEVICES='" + hidden + "' makes no GPU of this host visible"))
        << v.how;
  }
  EXPECT_TRUE(says(visible_gpu(Host{}, pci_order("0"), kNoDriver, 0), "lists no GPU"));
}

TEST(VisibleGpu, AGpuNamedTwiceHidesEveryGpu) {
  const Host h = gpu8();
  for (const std::string& twice :
       std::vector<std::string>{"3,3", "1,2,1", uuid(4) + ",GPU-a1b2c3d4"}) {
    const VisibleGpu v = visible_gpu(h, pci_order(twice), kNoDriver, 0);
    EXPECT_EQ(v.gpu, -1) << twice;
    EXPECT_TRUE(says(v, "twice, which makes CUDA hide every GPU")) << v.how;
  }
}

TEST(VisibleGpu, UuidsNameTheirGpusInTheListsOrderWhateverCudasOrder) {
  const Host h = gpu8();
  const std::string list = uuid(6) + "," + uuid(2);
  for (const CudaSettings& cuda : {default_order(list), pci_order(list)}) {
    const VisibleGpu first = visible_gpu(h, cuda, kNoDriver, 0);
    const VisibleGpu second = visible_gpu(h, cuda, kNoDriver, 1);
    EXPECT_EQ(first.gpu, 6);
    EXPECT_EQ(second.gpu, 2);
    EXPECT_FALSE(first.guessed) << first.how;
    EXPECT_TRUE(says(second, "entry 1 of 2 (local rank 1 % 2) of CUDA_VISIBLE_DEVICES='" + list +
                                 "', by the topology's GPU UUIDs"))
        << second.how;
  }
}

TEST(VisibleGpu, AUuidPrefixNamesTheOneGpuItBegins) {
  const Host h = gpu8();
  EXPECT_EQ(gpu_of(h, default_order("GPU-a1b2c3d5"), 0), 5);
  EXPECT_EQ(gpu_of(h, default_order("GPU-a1b2c3d5,GPU-a1b2c3d0-0000"), 1), 0);
  // Every UUID begins GPU-a1b2c3d: CUDA takes no prefix that names several.
  const VisibleGpu ambiguous = visible_gpu(h, default_order("GPU-a1b2c3d"), kNoDriver, 0);
  EXPECT_EQ(ambiguous.gpu, -1);
  EXPECT_TRUE(says(ambiguous, "entry 0 ('GPU-a1b2c3d') begins the UUIDs of several GPUs"))
      << ambiguous.how;
  const VisibleGpu stops =
      visible_gpu(h, default_order("GPU-a1b2c3d7,GPU-a1b2c3d,GPU-a1b2c3d1"), kNoDriver, 1);
  EXPECT_EQ(stops.gpu, 7);
  const VisibleGpu unknown =
      visible_gpu(h, default_order("GPU-8f1e2a3b-0000-4444-8888-123456789abc"), kNoDriver, 0);
  EXPECT_EQ(unknown.gpu, -1);
  EXPECT_TRUE(says(unknown, "begins no UUID the topology lists")) << unknown.how;
}

TEST(VisibleGpu, MigDevicesNameTheirGpuWhereTheirNameHoldsIt) {
  const Host h = gpu8();
  // The older form holds its GPU's UUID; CUDA enumerates the first MIG device only.
  const std::string mig = "MIG-" + uuid(4) + "/1/0,MIG-" + uuid(7) + "/2/0";
  for (int r = 0; r < 3; ++r) EXPECT_EQ(gpu_of(h, default_order(mig), r), 4) << r;
  const VisibleGpu own =
      visible_gpu(h, default_order("MIG-7b2c0f4e-1a2b-5c3d-9e8f-0123456789ab"), kNoDriver, 0);
  EXPECT_EQ(own.gpu, -1);
  EXPECT_TRUE(says(own, "names a MIG device by its own UUID")) << own.how;
}

TEST(VisibleGpu, UuidsWithoutTheTopologysUuidsSaySo) {
  Host h = gpu8();
  for (PciDevice& g : h.gpus) g.uuid.clear();
  const VisibleGpu v = visible_gpu(h, default_order("GPU-a1b2c3d5"), kNoDriver, 0);
  EXPECT_EQ(v.gpu, -1);
  EXPECT_TRUE(says(v, "names GPUs by UUID, which the topology does not record")) << v.how;
}

TEST(VisibleGpu, CudaCountsOnlyNvidiasGpus) {
  Host h = gpu8();
  PciDevice other = h.gpus[0];
  other.name = "card0";
  other.bus_id = "0000:01:00.0";  // before every NVIDIA GPU on the bus
  other.vendor_id = 0x1002;
  other.uuid.clear();
  h.gpus.push_back(other);
  EXPECT_EQ(gpu_of(h, pci_order("0"), 0), 0);
  EXPECT_EQ(gpu_of(h, pci_order(std::nullopt), 8), 0);
}

// The driver's list is CUDA's own order, whatever the rules would say: here
// it numbers cuda4 first (fastest first, on a machine whose node-1 GPUs are
// faster), writing bus ids its own way.
TEST(VisibleGpu, TheDriversOrderIsFollowed) {
  const Host h = gpu8();
  const std::vector<CudaDevice> fastest_first = {
      {"0000:92:00.0", uuid(4)}, {"00000000:12:00.0", ""}, {"0000:A3:00.0", uuid(7)}};
  for (const CudaSettings& cuda : {default_order(std::nullopt), pci_order("0,1,2")}) {
    const VisibleGpu first = visible_gpu(h, cuda, fastest_first, 0);
    EXPECT_EQ(first.gpu, 4);
    EXPECT_FALSE(first.guessed);
    EXPECT_TRUE(says(first,
                     "CUDA device 0 of 3 (local rank 0 % 3), PCI 0000:92:00.0, as the "
                     "CUDA driver reports"))
        << first.how;
    EXPECT_EQ(visible_gpu(h, cuda, fastest_first, 1).gpu, 0);
    EXPECT_EQ(visible_gpu(h, cuda, fastest_first, 2).gpu, 7);
    EXPECT_EQ(visible_gpu(h, cuda, fastest_first, 3).gpu, 4);
  }
  // A bus id that matches nothing: the UUID finds the GPU.
  EXPECT_EQ(visible_gpu(h, default_order(std::nullopt),
                        std::vector<CudaDevice>{{"0000:ff:1f.7", uuid(3)}}, 0)
                .gpu,
            3);
}

TEST(VisibleGpu, ADriverOfAnotherMachineLeavesItToTheRules) {
  const Host h = gpu8();
  // RINGLET_TOPO_FILE of another machine: this machine's one GPU is not in it.
  const VisibleGpu v =
      visible_gpu(h, pci_order("6"), std::vector<CudaDevice>{{"0000:01:00.0", ""}}, 0);
  EXPECT_EQ(v.gpu, 6);
  EXPECT_TRUE(
      v.how.starts_with("the CUDA driver's CUDA device 0 of 1 (local rank 0 % 1), PCI "
                        "0000:01:00.0, is not among the topology's GPUs; by CUDA's "
                        "rules: entry 0 of 1"))
      << v.how;
  // A driver that sees no device (here: the 6 of a one-GPU machine).
  const VisibleGpu none = visible_gpu(h, pci_order("6"), std::vector<CudaDevice>{}, 0);
  EXPECT_EQ(none.gpu, 6);
  EXPECT_TRUE(none.how.starts_with("the CUDA driver lists no device; by CUDA's rules: "))
      << none.how;
}

TEST(VisibleGpu, PciBusIdsCompareAsNumbers) {
  EXPECT_EQ(pci_bus_key("0000:3B:00.0"), pci_bus_key("00000000:3b:00.0"));
  EXPECT_NE(pci_bus_key("0000:3b:00.0"), pci_bus_key("0000:3b:00.1"));
  EXPECT_LT(*pci_bus_key("0000:12:00.0"), *pci_bus_key("0000:a2:00.0"));
  EXPECT_LT(*pci_bus_key("0000:ff:1f.7"), *pci_bus_key("0001:00:00.0"));
  for (const std::string bad : {"", "cuda0", "0000:3b:00", "0000:3b:00.0x", "0000:100:00.0"}) {
    EXPECT_FALSE(pci_bus_key(bad)) << bad;
  }
}

// This machine's driver, where it has one, lists GPUs that hwloc finds here;
// where it has none, the answer says why.
TEST(CudaDriver, ListsThisMachinesGpusOrSaysWhyNot) {
  const CudaDriverDevices& answer = cuda_driver_devices();
  EXPECT_EQ(&answer, &cuda_driver_devices());  // asked once
  if (!answer.devices) {
    EXPECT_FALSE(answer.why_not.empty());
    GTEST_SKIP() << "no CUDA driver answered: " << answer.why_not;
  }
  const Host here = discover().hosts.at(0);
  for (const CudaDevice& d : *answer.devices) {
    ASSERT_TRUE(pci_bus_key(d.bus_id)) << d.bus_id;
    bool found = false;
    for (const PciDevice& g : here.gpus)
      found = found || pci_bus_key(g.bus_id) == pci_bus_key(d.bus_id);
    EXPECT_TRUE(found) << d.bus_id << " is not among hwloc's GPUs";
    EXPECT_TRUE(d.uuid.starts_with("GPU-")) << d.uuid;
  }
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
  // -1 (no GPU derived) keeps the default, rank % GPUs.
  const auto mixed = place_local_ranks(h, 2, {-1, 7});
  EXPECT_EQ(mixed[0].gpu, 0);
  EXPECT_EQ(mixed[0].numa_node, 0);
  EXPECT_EQ(mixed[1].gpu, 7);
  EXPECT_EQ(mixed[1].numa_node, 1);
}

}  // namespace
}  // namespace ringlet::topology
