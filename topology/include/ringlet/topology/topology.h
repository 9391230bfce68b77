// What a machine looks like, as a value: hosts, their packages, NUMA nodes and
// cores, and the GPUs and NICs on PCI with the NUMA node each is closest to.
// discover() asks hwloc about this machine; load_hwloc_xml() reads a topology
// hwloc saved (from any machine), and JSON saves and loads the value itself,
// so tests can describe machines that are not there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ringlet/common/host_name.h"

namespace ringlet::topology {

struct Core {
  int index = 0;         // hwloc logical index: dense, 0.. on each host
  std::vector<int> pus;  // OS indexes of its hardware threads (what sched_setaffinity takes)
  bool operator==(const Core&) const = default;
};

struct NumaNode {
  int os_index = 0;
  uint64_t memory_bytes = 0;
  std::vector<Core> cores;  // the cores of this node inside the enclosing package
  bool operator==(const NumaNode&) const = default;
};

struct Package {
  int os_index = -1;  // -1 where hwloc reports no package
  uint64_t last_level_cache_bytes = 0;  // largest cache under the package; 0 if unknown
  std::vector<NumaNode> numa_nodes;
  bool operator==(const Package&) const = default;
};

enum class DeviceKind { kGpu, kNic };

struct PciDevice {
  DeviceKind kind = DeviceKind::kGpu;
  std::string name;        // OS name where hwloc has one ("cuda0", "mlx5_0", "eth0"), else the bus id
  std::string bus_id;      // "0000:3b:00.0"
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  int numa_node = -1;      // OS index of the closest NUMA node; -1 = not known
  // NICs: the network interfaces the device carries ("ib0", "ens1f0np0"),
  // which an RDMA device's name ("mlx5_0") is not; TCP listens on these.
  std::vector<std::string> netdevs;
  bool rdma = false;       // NICs: has an RDMA (OpenFabrics) device
  // GPUs: NVIDIA's UUID ("GPU-8f1e2a3b-..."), as nvidia-smi and
  // CUDA_VISIBLE_DEVICES write it, where hwloc's NVML component recorded it.
  std::string uuid;
  // The bridges above the device, from the host bridge down: a PCI bridge by
  // its bus id, a host bridge as "host:<domain>:<bus>". Two devices behind
  // the same switch share a longer prefix than two that meet at the host.
  std::vector<std::string> pci_path;
  bool operator==(const PciDevice&) const = default;
};

struct Host {
  std::string hostname;
  std::vector<Package> packages;
  std::vector<PciDevice> gpus;
  std::vector<PciDevice> nics;
  // hwloc's relative NUMA latencies (10 = local, as in the ACPI SLIT):
  // numa_distances[i * n + j] runs from node numa_order[i] to numa_order[j].
  // Both empty where the machine reports none.
  std::vector<int> numa_order;
  std::vector<uint64_t> numa_distances;

  int core_count() const;
  int numa_count() const;  // distinct NUMA nodes
  std::vector<int> pus() const;  // every PU's OS index, ascending
  // hwloc's latency from node `from` to node `to` (OS indexes); -1 = not known.
  int64_t numa_distance(int from, int to) const;
  bool operator==(const Host&) const = default;
};

struct Topology {
  std::vector<Host> hosts;
  bool operator==(const Topology&) const = default;
};

// This machine, one host, named `host_name` (by default the machine's own; a
// caller that reads the configuration passes the name it gives). Throws an
// internal common::Failure naming the hwloc call that failed.
Topology discover(const std::string& host_name = common::host_name());
// A topology hwloc exported (lstopo FILE.xml, or save_hwloc_xml), as one host.
// A file hwloc cannot read is an invalid-argument common::Failure naming it.
Topology load_hwloc_xml(const std::string& path);
// Exports this machine's topology as hwloc XML (for tests and bug reports);
// a path it cannot write is an invalid-argument common::Failure.
void save_hwloc_xml(const std::string& path);

void to_json(nlohmann::json& j, const Topology& t);
void from_json(const nlohmann::json& j, Topology& t);

}  // namespace ringlet::topology
