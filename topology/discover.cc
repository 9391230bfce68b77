// hwloc -> Topology. hwloc 2 hangs NUMA nodes beside the CPU tree (as memory
// children), so cores are placed by cpuset: a core belongs to the NUMA node
// whose cpuset includes its own, and to the package above it.
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "ringlet/common/failure.h"
#include "ringlet/topology/topology.h"

namespace ringlet::topology {
namespace {

// The one owner of an hwloc topology.
struct HwlocDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, HwlocDeleter>;

void check(int rc, const char* call) {
  if (rc != 0) {
    throw common::Failure(common::FailureKind::kInternal,
                          std::string("topology: ") + call + " failed");
  }
}

// The files are read and written here rather than by hwloc, whose calls do
// not say why they failed (errno after them may be anything): each failure
// names the file and its own errno, taken at once.
std::string read_xml(const std::string& path) {
  auto failed = [&path](int err) {
    return common::caller_error("topology: cannot read hwloc XML '" + path +
                                "': " + std::strerror(err));
  };
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw failed(errno);
  std::string text;
  char buf[64 * 1024];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err != 0) throw failed(err);
  return text;
}

void write_xml(const std::string& path, const char* text, size_t size) {
  auto failed = [&path](int err) {
    return common::caller_error("topology: cannot write hwloc XML to '" + path +
                                "': " + std::strerror(err));
  };
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw failed(errno);
  const bool written = std::fwrite(text, 1, size, f) == size;
  int err = written ? 0 : errno;
  if (std::fclose(f) != 0 && err == 0) err = errno;
  if (err != 0) throw failed(err);
}

HwlocTopology open_topology(const std::string* xml_path) {
  // Read before hwloc is asked anything, and kept until it has loaded.
  const std::string xml = xml_path != nullptr ? read_xml(*xml_path) : std::string();
  hwloc_topology_t raw = nullptr;
  check(hwloc_topology_init(&raw), "hwloc_topology_init");
  HwlocTopology topo(raw);
  // Only the PCI devices that matter (GPUs, NICs, their bridges): a full PCI
  // walk is slow on big machines and tells the ring nothing more.
  check(hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT),
        "hwloc_topology_set_io_types_filter");
  check(hwloc_topology_set_icache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE),
        "hwloc_topology_set_icache_types_filter");
  // OpenCL and GL discovery start GPU drivers or query X displays, which is
  // slow and tells nothing the PCI walk does not: GPUs are found on PCI.
  for (const char* slow : {"opencl", "gl"}) {
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, slow);
  }
  if (xml_path != nullptr) {
    // The size counts the terminating NUL, as hwloc asks.
    if (xml.size() >= INT_MAX ||
        hwloc_topology_set_xmlbuffer(raw, xml.c_str(), static_cast<int>(xml.size() + 1)) != 0) {
      throw common::caller_error("topology: '" + *xml_path + "' is not XML hwloc can read");
    }
    // The XML describes another machine: keep what it says it supported.
    hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_IMPORT_SUPPORT);
  }
  if (xml_path != nullptr && hwloc_topology_load(raw) != 0) {
    throw common::caller_error("topology: '" + *xml_path + "' is not a topology hwloc can load");
  }
  if (xml_path == nullptr) check(hwloc_topology_load(raw), "hwloc_topology_load");
  return topo;
}

int numa_of_cpuset(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset) {
  const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    if (hwloc_bitmap_isincluded(cpuset, node->cpuset)) return static_cast<int>(node->os_index);
  }
  return -1;
}

uint64_t largest_cache_below(hwloc_topology_t topo, hwloc_obj_t package) {
  uint64_t best = 0;
  for (hwloc_obj_type_t type : {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE}) {
    const int n = hwloc_get_nbobjs_by_type(topo, type);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t c = hwloc_get_obj_by_type(topo, type, i);
      if (package == nullptr || hwloc_bitmap_isincluded(c->cpuset, package->cpuset)) {
        best = std::max<uint64_t>(best, c->attr->cache.size);
      }
    }
    if (best) return best;
  }
  return best;
}

void add_cores(hwloc_topology_t topo, Host& host) {
  // Cores where hwloc knows them, else PUs (some VMs report no cores).
  hwloc_obj_type_t unit = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE
                                                                              : HWLOC_OBJ_PU;
  const int n = hwloc_get_nbobjs_by_type(topo, unit);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, unit, i);
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
    const int pkg_index = pkg ? static_cast<int>(pkg->os_index) : -1;
    const int numa = numa_of_cpuset(topo, obj->cpuset);

    auto p = std::find_if(host.packages.begin(), host.packages.end(),
                          [&](const Package& x) { return x.os_index == pkg_index; });
    if (p == host.packages.end()) {
      host.packages.push_back({pkg_index, largest_cache_below(topo, pkg), {}});
      p = host.packages.end() - 1;
    }
    auto node = std::find_if(p->numa_nodes.begin(), p->numa_nodes.end(),
                             [&](const NumaNode& x) { return x.os_index == numa; });
    if (node == p->numa_nodes.end()) {
      hwloc_obj_t numa_obj = hwloc_get_numanode_obj_by_os_index(topo, numa);
      p->numa_nodes.push_back({numa, numa_obj ? numa_obj->attr->numanode.local_memory : 0, {}});
      node = p->numa_nodes.end() - 1;
    }
    Core core;
    core.index = static_cast<int>(obj->logical_index);
    unsigned pu = 0;
    hwloc_bitmap_foreach_begin(pu, obj->cpuset) core.pus.push_back(static_cast<int>(pu));
    hwloc_bitmap_foreach_end();
    node->cores.push_back(std::move(core));
  }
}

// A GPU is a 3D controller of any vendor, or a display controller of a GPU
// vendor (a server's BMC has a VGA controller too, which is not one).
bool is_gpu(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci) {
  const unsigned cls = pci.class_id;
  if (cls == 0x0302) return true;
  return (cls >> 8) == 0x03 && (pci.vendor_id == 0x10de || pci.vendor_id == 0x1002);
}

// The bridges above `obj`, from the host bridge down (PciDevice::pci_path).
std::vector<std::string> pci_path(hwloc_obj_t obj) {
  std::vector<std::string> path;
  for (hwloc_obj_t up = obj->parent; up != nullptr && up->type == HWLOC_OBJ_BRIDGE;
       up = up->parent) {
    const auto& b = up->attr->bridge;
    char id[32];
    if (b.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
      std::snprintf(id, sizeof id, "%04x:%02x:%02x.%x", b.upstream.pci.domain, b.upstream.pci.bus,
                    b.upstream.pci.dev, b.upstream.pci.func);
    } else {
      std::snprintf(id, sizeof id, "host:%04x:%02x", b.downstream.pci.domain,
                    b.downstream.pci.secondary_bus);
    }
    path.insert(path.begin(), id);
  }
  return path;
}

// The N of a "cudaN" name; -1 for any other.
int cuda_index(const std::string& name) {
  if (name.size() <= 4 || name.compare(0, 4, "cuda") != 0) return -1;
  int n = 0;
  for (size_t i = 4; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || n > 100000) return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

void add_pci_devices(hwloc_topology_t topo, Host& host) {
  for (hwloc_obj_t obj = hwloc_get_next_pcidev(topo, nullptr); obj != nullptr;
       obj = hwloc_get_next_pcidev(topo, obj)) {
    const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci = obj->attr->pcidev;
    const bool gpu = is_gpu(pci);
    const bool nic = (pci.class_id >> 8) == 0x02;
    if (!gpu && !nic) continue;
    PciDevice d;
    d.kind = gpu ? DeviceKind::kGpu : DeviceKind::kNic;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%x", pci.domain, pci.bus, pci.dev, pci.func);
    d.bus_id = bus;
    d.vendor_id = pci.vendor_id;
    d.device_id = pci.device_id;
    d.name = d.bus_id;
    // Prefer the OS device's name: "cuda0" over "card1", "mlx5_0" over "ib0".
    int best_rank = 100;
    for (hwloc_obj_t os = obj->io_first_child; os != nullptr; os = os->next_sibling) {
      if (os->type != HWLOC_OBJ_OS_DEVICE || os->name == nullptr) continue;
      const auto t = os->attr->osdev.type;
      if (t == HWLOC_OBJ_OSDEV_NETWORK) d.netdevs.emplace_back(os->name);
      if (t == HWLOC_OBJ_OSDEV_OPENFABRICS) d.rdma = true;
      // hwloc's NVML component puts the GPU's UUID on its nvmlN device.
      if (const char* uuid = hwloc_obj_get_info_by_name(os, "NVIDIAUUID")) d.uuid = uuid;
      const int rank = t == HWLOC_OBJ_OSDEV_COPROC ? 0 : t == HWLOC_OBJ_OSDEV_OPENFABRICS ? 1
                       : t == HWLOC_OBJ_OSDEV_NETWORK ? 2 : 3;
      if (rank < best_rank) {
        best_rank = rank;
        d.name = os->name;
      }
    }
    d.pci_path = pci_path(obj);
    // The closest NUMA node, unless the device hangs off the whole machine.
    // On a machine with one NUMA node, that node is every device's closest.
    hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(topo, obj);
    const bool one_node = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) == 1;
    if (cpu_side && cpu_side->nodeset && (one_node || cpu_side->type != HWLOC_OBJ_MACHINE)) {
      d.numa_node = hwloc_bitmap_first(cpu_side->nodeset);
    }
    (gpu ? host.gpus : host.nics).push_back(std::move(d));
  }
  // GPUs in CUDA's numbering where hwloc knows it ("cuda0", "cuda1", ...),
  // since a rank's GPU is picked by that number (local rank % GPUs); CUDA
  // may number them otherwise than the PCI walk. The others follow in PCI order.
  std::stable_sort(host.gpus.begin(), host.gpus.end(), [](const PciDevice& a, const PciDevice& b) {
    const unsigned ia = static_cast<unsigned>(cuda_index(a.name));
    const unsigned ib = static_cast<unsigned>(cuda_index(b.name));
    return ia < ib;  // -1 becomes the largest
  });
}

void add_distances(hwloc_topology_t topo, Host& host) {
  unsigned nr = 1;
  hwloc_distances_s* dist = nullptr;
  if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &dist,
                                  HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
      nr == 0) {
    return;
  }
  for (unsigned i = 0; i < dist->nbobjs; ++i) {
    host.numa_order.push_back(static_cast<int>(dist->objs[i]->os_index));
  }
  host.numa_distances.assign(dist->values, dist->values + dist->nbobjs * dist->nbobjs);
  hwloc_distances_release(topo, dist);
}

Topology from_hwloc(hwloc_topology_t topo, std::string hostname) {
  Host host;
  host.hostname = std::move(hostname);
  add_cores(topo, host);
  add_pci_devices(topo, host);
  add_distances(topo, host);
  Topology t;
  t.hosts.push_back(std::move(host));
  return t;
}

}  // namespace

Topology discover(const std::string& host_name) {
  HwlocTopology topo = open_topology(nullptr);
  return from_hwloc(topo.get(), host_name);
}

Topology load_hwloc_xml(const std::string& path) {
  HwlocTopology topo = open_topology(&path);
  const char* name = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo.get()), "HostName");
  return from_hwloc(topo.get(), name ? name : "");
}

void save_hwloc_xml(const std::string& path) {
  HwlocTopology topo = open_topology(nullptr);
  char* text = nullptr;
  int size = 0;  // with the terminating NUL
  check(hwloc_topology_export_xmlbuffer(topo.get(), &text, &size, 0),
        "hwloc_topology_export_xmlbuffer");
  std::unique_ptr<char, std::function<void(char*)>> owned(
      text, [&topo](char* p) { hwloc_free_xmlbuffer(topo.get(), p); });
  write_xml(path, text, size > 0 ? static_cast<size_t>(size - 1) : 0);
}

int Host::core_count() const {
  int n = 0;
  for (const auto& p : packages) {
    for (const auto& node : p.numa_nodes) n += static_cast<int>(node.cores.size());
  }
  return n;
}

std::vector<int> Host::pus() const {
  std::vector<int> all;
  for (const auto& p : packages) {
    for (const auto& node : p.numa_nodes) {
      for (const auto& c : node.cores) all.insert(all.end(), c.pus.begin(), c.pus.end());
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

int64_t Host::numa_distance(int from, int to) const {
  const auto at = [this](int node) {
    return std::find(numa_order.begin(), numa_order.end(), node) - numa_order.begin();
  };
  const size_t n = numa_order.size();
  const size_t i = static_cast<size_t>(at(from)), j = static_cast<size_t>(at(to));
  if (i >= n || j >= n || numa_distances.size() != n * n) return -1;
  return static_cast<int64_t>(numa_distances[i * n + j]);
}

int Host::numa_count() const {
  std::vector<int> seen;
  for (const auto& p : packages) {
    for (const auto& node : p.numa_nodes) {
      if (std::find(seen.begin(), seen.end(), node.os_index) == seen.end()) {
        seen.push_back(node.os_index);
      }
    }
  }
  return static_cast<int>(seen.size());
}

}  // namespace ringlet::topology
