#include "core/bootstrap/placement.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <memory>

#include "ringlet/common/logging.h"
#include "ringlet/topology/affinity.h"
#include "ringlet/topology/cuda_driver.h"
#include "ringlet/topology/nic_interface.h"
#include "ringlet/topology/visible_gpu.h"

namespace ringlet::core {
namespace {

using common::LogLevel;
using topology::BindAction;
using topology::cpu_list_text;

// What this process's affinity was before an init() of this process bound
// it, and what it bound it to: a later init() that finds the affinity it set
// must not take it for the user's binding.
struct OwnBinding {
  std::vector<int> before;
  std::vector<int> bound_to;
};
std::optional<OwnBinding>& own_binding() {
  static std::optional<OwnBinding> b;
  return b;
}

std::string where(const topology::Host& host, const topology::Placement& p) {
  std::string s =
      p.numa_node >= 0 ? "NUMA node " + std::to_string(p.numa_node) : "no one NUMA node";
  if (p.gpu >= 0) s += ", GPU " + host.gpus[p.gpu].name;
  return s;
}

size_t llc_of(const topology::Host& host, const topology::Placement& p) {
  if (p.cores.empty()) return 0;
  for (const auto& pkg : host.packages) {
    for (const auto& node : pkg.numa_nodes) {
      for (const auto& core : node.cores) {
        if (core.index == p.cores.front()) return pkg.last_level_cache_bytes;
      }
    }
  }
  return 0;
}

std::optional<uint32_t> resolve_ipv4(const std::string& host) {
  if (auto a = topology::parse_ipv4(host)) return a;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &raw) != 0 || raw == nullptr)
    return std::nullopt;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(raw, &::freeaddrinfo);
  return ntohl(reinterpret_cast<const sockaddr_in*>(raw->ai_addr)->sin_addr.s_addr);
}

}  // namespace

std::optional<topology::Host> load_host_topology(const Config& config, int rank) {
  if (!config.topo_file.empty()) {
    try {
      topology::Topology t = topology::load_hwloc_xml(config.topo_file);
      if (t.hosts.empty()) throw common::caller_error("it describes no host");
      return std::move(t.hosts.front());
    } catch (const common::Failure& e) {
      throw ConfigError(
          rank, "RINGLET_TOPO_FILE='" + config.topo_file + "' cannot be used: " + e.cause());
    }
  }
  try {
    topology::Topology t = topology::discover(host_name(config));
    return std::move(t.hosts.front());
  } catch (const std::exception& e) {
    common::log(LogLevel::kWarning,
                "placement: hwloc could not discover this machine (%s): ranks are not bound, the "
                "ring follows host names only",
                e.what());
    return std::nullopt;
  }
}

int visible_gpu_of_this_rank(const std::optional<topology::Host>& host, int local_rank) {
  if (!host || host->gpus.empty()) return -1;
  // Read here, not in Config: CUDA's variables, not Ringlet's settings.
  auto variable = [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  };
  const topology::CudaSettings cuda{variable("CUDA_VISIBLE_DEVICES"),
                                    variable("CUDA_DEVICE_ORDER")};
  // Only where the topology lists GPUs: the driver's start (cuInit, no
  // context) is not paid on machines without them.
  const topology::CudaDriverDevices& driver = topology::cuda_driver_devices();
  const topology::VisibleGpu v = topology::visible_gpu(*host, cuda, driver.devices, local_rank);
  const std::string no_driver =
      driver.devices ? std::string() : "; no CUDA driver answered (" + driver.why_not + ")";
  if (v.gpu < 0) {
    common::log(LogLevel::kInfo, "placement: local rank %d: %s%s: its GPU is taken as %s",
                local_rank, v.how.c_str(), no_driver.c_str(), "local rank % GPUs");
  } else {
    common::log(LogLevel::kInfo, "placement: local rank %d drives GPU %s: %s%s%s", local_rank,
                host->gpus[static_cast<size_t>(v.gpu)].name.c_str(), v.how.c_str(),
                no_driver.c_str(), v.guessed ? "; a guess" : "");
  }
  return v.gpu;
}

RankPlacement place_this_rank(const std::optional<topology::Host>& host, const Config& config,
                              int local_rank, int local_size, const std::vector<int>& gpus) {
  RankPlacement out;
  if (!host) return out;
  const std::vector<int> online = topology::online_cpus();
  {
    const std::vector<int> pus = host->pus();
    std::vector<int> here;
    std::set_intersection(pus.begin(), pus.end(), online.begin(), online.end(),
                          std::back_inserter(here));
    out.host_cpus = static_cast<int>(here.size());
  }
  out.placement = topology::place_local_ranks(*host, local_size, gpus).at(local_rank);
  const topology::Placement& p = out.placement;
  std::vector<int> allowed = topology::process_affinity();
  if (own_binding() && allowed == own_binding()->bound_to) allowed = own_binding()->before;
  out.binding = topology::plan_binding(*host, p, config.bind == BindMode::kAuto, allowed, online);
  topology::Binding& b = out.binding;
  const std::string source =
      config.topo_file.empty() ? std::string() : " (RINGLET_TOPO_FILE=" + config.topo_file + ")";
  switch (b.action) {
    case BindAction::kBind:
      try {
        topology::bind_process(b.cpus);
        own_binding() = OwnBinding{allowed, b.cpus};
        common::log(LogLevel::kInfo, "placement: local rank %d of %d bound to CPUs %s (%s)%s",
                    local_rank, local_size, cpu_list_text(b.cpus).c_str(), where(*host, p).c_str(),
                    source.c_str());
      } catch (const std::exception& e) {
        common::log(LogLevel::kWarning, "placement: local rank %d left unbound: %s", local_rank,
                    e.what());
      }
      break;
    case BindAction::kUserBound:
      common::log(LogLevel::kInfo,
                  "placement: local rank %d was started bound to CPUs %s, fewer than the %d "
                  "this host has: left as it is",
                  local_rank, cpu_list_text(allowed).c_str(), out.host_cpus);
      break;
    case BindAction::kNotHere:
      common::log(LogLevel::kInfo,
                  "placement: local rank %d belongs on CPUs %s (%s)%s, none of them online here: "
                  "left unbound",
                  local_rank, cpu_list_text(p.pus).c_str(), where(*host, p).c_str(),
                  source.c_str());
      break;
    case BindAction::kEverywhere:
      common::log(
          LogLevel::kInfo,
          "placement: local rank %d of %d may run on every CPU it has (%s): nothing to bind",
          local_rank, local_size, cpu_list_text(allowed).c_str());
      break;
    case BindAction::kDisabled:
      common::log(LogLevel::kInfo, "placement: RINGLET_BIND=none: local rank %d left unbound",
                  local_rank);
      break;
    case BindAction::kNoCores:
      common::log(LogLevel::kInfo,
                  "placement: the topology lists no cores: local rank %d left unbound", local_rank);
      break;
  }
  out.locality = topology::ring_locality(*host, b.numa_node);
  out.llc_bytes = llc_of(*host, p);
  return out;
}

std::string nic_address(const std::optional<topology::Host>& host, const RankPlacement& placed,
                        int local_rank, const std::string& rank0_host,
                        const std::string& store_local_address) {
  if (!host || placed.placement.nic < 0) return "";
  const topology::PciDevice& nic = host->nics.at(placed.placement.nic);
  const auto rank0 = resolve_ipv4(rank0_host);
  if (!rank0) {
    common::log(LogLevel::kInfo,
                "placement: NIC %s nearest local rank %d not used: rank 0's host '%s' has no IPv4 "
                "address; TCP links listen where this rank reached rank 0",
                nic.name.c_str(), local_rank, rank0_host.c_str());
    return "";
  }
  const auto here = topology::ipv4_interfaces();
  const topology::NicInterface choice = topology::nic_interface(
      nic, here, *rank0, topology::interface_with_address(here, store_local_address));
  if (choice.interface.empty()) {
    common::log(LogLevel::kInfo,
                "placement: NIC %s nearest local rank %d not used (%s): TCP links listen on %s, "
                "where this rank reached rank 0",
                nic.name.c_str(), local_rank, choice.reason.c_str(), store_local_address.c_str());
    return "";
  }
  common::log(LogLevel::kInfo, "placement: local rank %d's TCP links use NIC %s, %s", local_rank,
              nic.name.c_str(), choice.reason.c_str());
  return choice.address;
}

}  // namespace ringlet::core
