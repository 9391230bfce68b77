#include "ringlet/topology/placement.h"

#include <algorithm>
#include <numeric>

namespace ringlet::topology {
namespace {

struct NodeCores {
  int os_index;
  std::vector<const Core*> cores;
  size_t next = 0;  // round-robin cursor
};

}  // namespace

std::vector<Placement> place_local_ranks(const Host& host, int local_ranks) {
  // Cores per NUMA node in hwloc order; a node spanning packages collects all of them.
  std::vector<NodeCores> nodes;
  for (const Package& p : host.packages) {
    for (const NumaNode& n : p.numa_nodes) {
      auto it = std::find_if(nodes.begin(), nodes.end(),
                             [&](const NodeCores& x) { return x.os_index == n.os_index; });
      if (it == nodes.end()) {
        nodes.push_back({n.os_index, {}, 0});
        it = nodes.end() - 1;
      }
      for (const Core& c : n.cores) it->cores.push_back(&c);
    }
  }
  std::erase_if(nodes, [](const NodeCores& n) { return n.cores.empty(); });

  std::vector<Placement> out;
  size_t next_node = 0;
  for (int r = 0; r < local_ranks; ++r) {
    Placement p;
    p.local_rank = r;
    NodeCores* node = nullptr;
    if (!host.gpus.empty()) {
      p.gpu = r % static_cast<int>(host.gpus.size());
      const int want = host.gpus[p.gpu].numa_node;
      for (auto& n : nodes) {
        if (n.os_index == want) node = &n;
      }
    }
    if (node == nullptr && !nodes.empty()) node = &nodes[next_node++ % nodes.size()];
    if (node != nullptr) {
      const Core* core = node->cores[node->next++ % node->cores.size()];
      p.numa_node = node->os_index;
      p.core = core->index;
      p.pus = core->pus;
    }
    // The NIC on the rank's NUMA node, else the first one.
    for (size_t i = 0; i < host.nics.size(); ++i) {
      if (host.nics[i].numa_node == p.numa_node) {
        p.nic = static_cast<int>(i);
        break;
      }
    }
    if (p.nic < 0 && !host.nics.empty()) p.nic = 0;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<int> local_ring(int local_ranks) {
  std::vector<int> ring(static_cast<size_t>(std::max(local_ranks, 0)));
  std::iota(ring.begin(), ring.end(), 0);
  return ring;
}

}  // namespace ringlet::topology
