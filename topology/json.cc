// The topology as JSON: field names follow the struct members, so a file is
// easy to write by hand for a machine that is not there.
#include <nlohmann/json.hpp>

#include "ringlet/topology/topology.h"

namespace ringlet::topology {

NLOHMANN_JSON_SERIALIZE_ENUM(DeviceKind, {{DeviceKind::kGpu, "gpu"}, {DeviceKind::kNic, "nic"}})

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Core, index, pus)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(NumaNode, os_index, memory_bytes, cores)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Package, os_index, last_level_cache_bytes,
                                                numa_nodes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PciDevice, kind, name, bus_id, vendor_id, device_id,
                                                numa_node, netdevs, rdma, pci_path, uuid)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Host, hostname, packages, gpus, nics, numa_order,
                                                numa_distances)

void to_json(nlohmann::json& j, const Topology& t) { j = nlohmann::json{{"hosts", t.hosts}}; }

void from_json(const nlohmann::json& j, Topology& t) {
  t.hosts = j.at("hosts").get<std::vector<Host>>();
}

}  // namespace ringlet::topology
