#include "report.h"

#include <cstdio>
#include <iomanip>

#include "ringlet/topology/affinity.h"

namespace ringlet_topo {
namespace {

namespace topo = ringlet::topology;
using topo::cpu_list_text;

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string numa_text(int node) { return node < 0 ? "-" : std::to_string(node); }

std::string nic_text(const topo::PciDevice& d) {
  std::string s = d.name;
  std::string extra;
  for (const std::string& n : d.netdevs) {
    if (n != d.name) extra += (extra.empty() ? "" : ", ") + n;
  }
  if (d.rdma) extra += std::string(extra.empty() ? "" : ", ") + "RDMA";
  return extra.empty() ? s : s + " (" + extra + ")";
}

void print_devices(const char* what, const std::vector<topo::PciDevice>& devices,
                   std::ostream& out) {
  out << "  " << what << ": " << devices.size() << "\n";
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    char ids[16];
    std::snprintf(ids, sizeof ids, "%04x:%04x", d.vendor_id, d.device_id);
    out << "    [" << i << "] " << (d.kind == topo::DeviceKind::kNic ? nic_text(d) : d.name)
        << "  pci " << d.bus_id << "  id " << ids << "  numa " << numa_text(d.numa_node)
        << (d.uuid.empty() ? "" : "  uuid " + d.uuid) << "\n";
  }
}

void print_capabilities(const char* title, const std::vector<Capability>& caps, std::ostream& out) {
  out << title << "\n";
  for (const Capability& c : caps) {
    out << "  [" << (c.usable ? 'X' : ' ') << "] " << c.name << "  (" << c.detail << ")\n";
  }
}

nlohmann::json capabilities_json(const std::vector<Capability>& caps) {
  auto out = nlohmann::json::array();
  for (const Capability& c : caps) {
    out.push_back({{"name", c.name}, {"usable", c.usable}, {"detail", c.detail}});
  }
  return out;
}

}  // namespace

void print_text(const Report& r, std::ostream& out) {
  const topo::Host& host = r.topology.hosts.front();
  out << "host " << (host.hostname.empty() ? "(unnamed)" : host.hostname) << " (" << r.source
      << "): " << host.packages.size() << " package(s), " << host.numa_count() << " NUMA node(s), "
      << host.core_count() << " core(s), " << host.pus().size() << " PU(s)\n";
  for (const auto& p : host.packages) {
    out << "  package " << (p.os_index < 0 ? std::string("?") : std::to_string(p.os_index));
    if (p.last_level_cache_bytes)
      out << "  (last-level cache " << mib(p.last_level_cache_bytes) << ")";
    out << "\n";
    for (const auto& n : p.numa_nodes) {
      std::vector<int> cores, pus;
      for (const auto& c : n.cores) {
        cores.push_back(c.index);
        pus.insert(pus.end(), c.pus.begin(), c.pus.end());
      }
      std::sort(pus.begin(), pus.end());
      out << "    numa " << numa_text(n.os_index) << "  " << mib(n.memory_bytes) << "  cores "
          << cpu_list_text(cores) << "  (PUs " << cpu_list_text(pus) << ")\n";
    }
  }
  print_devices("gpus", host.gpus, out);
  print_devices("nics", host.nics, out);

  const JobPlan& job = r.job;
  out << "job: " << job.ranks.size() << " rank(s) on " << job.hosts.size()
      << " host(s), each like the one above (RINGLET_BIND=auto, ranks started unbound)\n";
  size_t host_width = 4;
  for (const auto& h : job.hosts) host_width = std::max(host_width, h.size());
  out << "  " << std::left << std::setw(6) << "rank" << std::setw(host_width + 2) << "host"
      << std::setw(7) << "local" << std::setw(6) << "numa" << std::setw(20) << "cpus"
      << std::setw(8) << "gpu"
      << "nic\n";
  for (const RankRow& row : job.ranks) {
    const topo::Placement& p = row.placement;
    std::string cpus = p.pus.empty() ? "-" : cpu_list_text(p.pus);
    if (p.shared) cpus += " (shared)";
    out << "  " << std::setw(6) << row.rank << std::setw(host_width + 2) << row.host << std::setw(7)
        << row.local_rank << std::setw(6) << numa_text(p.numa_node) << std::setw(20) << cpus
        << std::setw(8) << (p.gpu >= 0 ? host.gpus[p.gpu].name : "-")
        << (p.nic >= 0 ? nic_text(host.nics[p.nic]) : "-") << "\n";
  }
  out << std::right << "ring:";
  int last_host = -1;
  for (int rank : job.ring) {
    const int h = job.ranks[rank].host_index;
    if (last_host >= 0 && h != last_host) out << " |";
    last_host = h;
    out << " " << rank;
  }
  out << "  (hosts in order, each host's ranks together, NUMA node by NUMA node)\n";
  print_capabilities("transports (this build, this machine):", r.transports, out);
  print_capabilities("launchers (this machine):", r.launchers, out);
}

nlohmann::json to_json(const Report& r) {
  const topo::Host& host = r.topology.hosts.front();
  auto rows = nlohmann::json::array();
  for (const RankRow& row : r.job.ranks) {
    const topo::Placement& p = row.placement;
    nlohmann::json j = {{"rank", row.rank},
                        {"host", row.host},
                        {"local_rank", row.local_rank},
                        {"numa_node", p.numa_node},
                        {"cores", p.cores},
                        {"pus", p.pus},
                        {"shared", p.shared},
                        {"gpu", nullptr},
                        {"nic", nullptr},
                        {"netdevs", nlohmann::json::array()}};
    if (p.gpu >= 0) j["gpu"] = host.gpus[p.gpu].name;
    if (p.nic >= 0) {
      j["nic"] = host.nics[p.nic].name;
      j["netdevs"] = host.nics[p.nic].netdevs;
    }
    rows.push_back(std::move(j));
  }
  return {{"topology", r.topology},
          {"source", r.source},
          {"hosts", r.job.hosts},
          {"ranks", r.job.ranks.size()},
          {"job", rows},
          {"ring", r.job.ring},
          {"transports", capabilities_json(r.transports)},
          {"launchers", capabilities_json(r.launchers)}};
}

}  // namespace ringlet_topo
