// ringlet-topo [--xml FILE | --from-json FILE] [--json] [--ranks N] [--save-xml FILE]
//
// Prints the machine as Ringlet sees it (packages, NUMA nodes, cores, GPUs,
// NICs) and, for N local ranks, the core, GPU and NIC each would use and the
// ring order within the host.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

#include "ringlet/topology/placement.h"
#include "ringlet/topology/topology.h"

namespace topo = ringlet::topology;

namespace {

std::vector<int> ring(const topo::Host& host, const std::vector<topo::Placement>& placement) {
  std::vector<int> ranks, locality;
  for (const auto& p : placement) {
    ranks.push_back(p.local_rank);
    locality.push_back(topo::ring_locality(host, p.numa_node));
  }
  return topo::ring_order({ranks}, locality);
}

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string numa_text(int node) { return node < 0 ? "?" : std::to_string(node); }

void print_devices(const char* what, const std::vector<topo::PciDevice>& devices) {
  std::cout << "  " << what << ": " << devices.size() << "\n";
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    char ids[16];
    std::snprintf(ids, sizeof ids, "%04x:%04x", d.vendor_id, d.device_id);
    std::cout << "    [" << i << "] " << d.name << "  pci " << d.bus_id << "  id " << ids
              << "  numa " << numa_text(d.numa_node) << "\n";
  }
}

void print_text(const topo::Host& host, const std::vector<topo::Placement>& placement) {
  std::cout << "host " << (host.hostname.empty() ? "(unnamed)" : host.hostname) << ": "
            << host.packages.size() << " package(s), " << host.numa_count() << " NUMA node(s), "
            << host.core_count() << " core(s)\n";
  for (const auto& p : host.packages) {
    std::cout << "  package " << (p.os_index < 0 ? std::string("?") : std::to_string(p.os_index));
    if (p.last_level_cache_bytes) std::cout << "  (last-level cache " << mib(p.last_level_cache_bytes) << ")";
    std::cout << "\n";
    for (const auto& n : p.numa_nodes) {
      std::cout << "    numa " << numa_text(n.os_index) << "  " << mib(n.memory_bytes) << "  cores";
      for (const auto& c : n.cores) std::cout << " " << c.index;
      std::cout << "\n";
    }
  }
  print_devices("gpus", host.gpus);
  print_devices("nics", host.nics);
  std::cout << "placement of " << placement.size() << " local rank(s):\n";
  for (const auto& p : placement) {
    std::cout << "  local rank " << p.local_rank << ": cores";
    for (int c : p.cores) std::cout << " " << c;
    std::cout << " (pu";
    for (int pu : p.pus) std::cout << " " << pu;
    std::cout << ")  numa " << numa_text(p.numa_node);
    if (p.gpu >= 0) std::cout << "  gpu " << host.gpus[p.gpu].name;
    if (p.nic >= 0) std::cout << "  nic " << host.nics[p.nic].name;
    std::cout << "\n";
  }
  std::cout << "ring within the host:";
  for (int r : ring(host, placement)) std::cout << " " << r;
  std::cout << "\n";
}

nlohmann::json placement_json(const std::vector<topo::Placement>& placement) {
  auto out = nlohmann::json::array();
  for (const auto& p : placement) {
    out.push_back({{"local_rank", p.local_rank}, {"cores", p.cores}, {"pus", p.pus},
                   {"numa_node", p.numa_node}, {"gpu", p.gpu}, {"nic", p.nic}});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"What hwloc found on this machine, and where Ringlet's local ranks would run."};
  std::string xml, from_json, save_xml;
  bool json = false;
  int ranks = 0;
  auto* xml_opt = app.add_option("--xml", xml, "read an hwloc XML topology instead of this machine")
                      ->check(CLI::ExistingFile);
  app.add_option("--from-json", from_json, "read a topology ringlet-topo --json wrote")
      ->check(CLI::ExistingFile)
      ->excludes(xml_opt);
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_option("-n,--ranks", ranks,
                 "local ranks to place (default: one per GPU, else one per core)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--save-xml", save_xml, "also export this machine's hwloc XML to FILE");
  CLI11_PARSE(app, argc, argv);

  try {
    topo::Topology t;
    if (!xml.empty()) {
      t = topo::load_hwloc_xml(xml);
    } else if (!from_json.empty()) {
      std::ifstream in(from_json);
      nlohmann::json j = nlohmann::json::parse(in);
      t = (j.contains("topology") ? j.at("topology") : j).get<topo::Topology>();
    } else {
      t = topo::discover();
    }
    if (!save_xml.empty()) topo::save_hwloc_xml(save_xml);
    if (t.hosts.empty()) throw std::runtime_error("the topology lists no host");
    const topo::Host& host = t.hosts.front();
    if (ranks == 0) ranks = host.gpus.empty() ? host.core_count() : static_cast<int>(host.gpus.size());
    const auto placement = topo::place_local_ranks(host, ranks);
    if (json) {
      nlohmann::json out{{"topology", t},
                         {"ranks", ranks},
                         {"placement", placement_json(placement)},
                         {"ring", ring(host, placement)}};
      std::cout << out.dump(2) << "\n";
    } else {
      print_text(host, placement);
    }
  } catch (const std::exception& e) {
    std::cerr << "ringlet-topo: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
