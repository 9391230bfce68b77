// ringlet-topo [--input FILE | --xml FILE | --from-json FILE] [--json]
//              [-n N] [-H host:slots,... | --hostfile F] [--save-xml FILE]
//
// Prints the machine as Ringlet sees it (packages, NUMA nodes, cores, GPUs,
// NICs); for a job of N ranks, on this host or on the hosts -H names (each
// taken to look like this one), the host, CPUs, NUMA node, GPU and NIC of
// every rank and the ring init() would form; and which transports and
// launchers this build and machine can use. The topology is this machine's
// (hwloc), or the file given, or RINGLET_TOPO_FILE's, the file init() reads.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "capabilities.h"
#include "hosts.h"
#include "job_plan.h"
#include "report.h"
#include "ringlet/common/failure.h"
#include "ringlet/topology/topology.h"

namespace topo = ringlet::topology;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

topo::Topology from_json_file(const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(read_file(path));
  // Either a topology, or what ringlet-topo --json printed.
  return (j.contains("topology") ? j.at("topology") : j).get<topo::Topology>();
}

// An hwloc XML starts with '<', JSON with '{'.
bool looks_like_json(const std::string& path) {
  const std::string text = read_file(path);
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "What hwloc found on this machine, where Ringlet's ranks would run and in which ring "
      "order, and what this build and machine can run a job with."};
  std::string input, xml, from_json, save_xml, host_list, hostfile;
  bool json = false;
  int ranks = 0;
  auto* input_opt =
      app.add_option("-i,--input", input,
                     "read the topology from FILE: hwloc XML (ringlet-topo --save-xml, lstopo "
                     "F.xml) or JSON (ringlet-topo --json)")
          ->check(CLI::ExistingFile);
  auto* xml_opt = app.add_option("--xml", xml, "read an hwloc XML topology (as --input)")
                      ->check(CLI::ExistingFile)
                      ->excludes(input_opt);
  app.add_option("--from-json", from_json, "read a topology ringlet-topo --json wrote (as --input)")
      ->check(CLI::ExistingFile)
      ->excludes(input_opt)
      ->excludes(xml_opt);
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_option("-n,--ranks", ranks,
                 "ranks of the job (default: the slots -H names, else one per GPU, else one per "
                 "core)")
      ->check(CLI::PositiveNumber);
  auto* hosts_opt =
      app.add_option("-H,--hosts", host_list, "hosts of the job, as ringletrun: host1:4,host2:4");
  app.add_option("--hostfile", hostfile, "hosts of the job, as ringletrun's --hostfile")
      ->check(CLI::ExistingFile)
      ->excludes(hosts_opt);
  app.add_option("--save-xml", save_xml,
                 "write the topology shown as hwloc XML to FILE, for RINGLET_TOPO_FILE");
  CLI11_PARSE(app, argc, argv);

  try {
    ringlet_topo::Report report;
    std::string xml_file;  // the hwloc XML read, if any (for --save-xml)
    const char* env_file = std::getenv("RINGLET_TOPO_FILE");
    if (input.empty() && xml.empty() && from_json.empty() && env_file != nullptr &&
        *env_file != '\0') {
      xml_file = env_file;
      report.source = std::string("RINGLET_TOPO_FILE=") + env_file;
    }
    if (!input.empty()) {
      if (looks_like_json(input)) {
        from_json = input;
      } else {
        xml_file = input;
      }
    }
    if (!xml.empty()) xml_file = xml;
    if (!from_json.empty()) {
      report.topology = from_json_file(from_json);
      report.source = from_json;
    } else if (!xml_file.empty()) {
      report.topology = topo::load_hwloc_xml(xml_file);
      if (report.source.empty()) report.source = xml_file;
    } else {
      report.topology = topo::discover();
      report.source = "this machine";
    }
    if (report.topology.hosts.empty()) throw std::runtime_error("the topology lists no host");
    if (!save_xml.empty()) {
      if (!from_json.empty()) {
        throw std::runtime_error("--save-xml: a topology read from JSON has no hwloc XML to save");
      }
      if (xml_file.empty()) {
        topo::save_hwloc_xml(save_xml);
      } else {
        std::ofstream out(save_xml, std::ios::binary);
        out << read_file(xml_file);
        if (!out.flush()) throw std::runtime_error("cannot write '" + save_xml + "'");
      }
    }
    const topo::Host& host = report.topology.hosts.front();
    const std::string here = ringletrun::this_hostname();
    std::vector<ringletrun::HostSlots> hosts;
    if (!host_list.empty()) hosts = ringletrun::parse_host_list(host_list);
    if (!hostfile.empty()) {
      std::ifstream in(hostfile);
      hosts = ringletrun::parse_hostfile(in);
    }
    std::vector<ringletrun::RankPlace> places;
    if (!hosts.empty()) {
      int slots = 0;
      for (const auto& h : hosts) slots += h.slots;
      places = ringletrun::place_ranks(hosts, ranks > 0 ? ranks : slots, here);
    } else {
      if (ranks == 0) {
        ranks =
            host.gpus.empty() ? std::max(host.core_count(), 1) : static_cast<int>(host.gpus.size());
      }
      places = ringletrun::place_here(ranks);
    }
    // Local ranks are shown under the topology's host name where it has one.
    report.job = ringlet_topo::plan_job(host, places, host.hostname.empty() ? here : host.hostname);
    report.transports = ringlet_topo::transports();
    report.launchers = ringlet_topo::launchers();
    if (json) {
      std::cout << ringlet_topo::to_json(report).dump(2) << "\n";
    } else {
      ringlet_topo::print_text(report, std::cout);
    }
  } catch (const std::exception& e) {
    std::cerr << "ringlet-topo: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
