#include "ringlet/topology/placement.h"

#include <algorithm>
#include <map>

#include "ringlet/common/even_split.h"

namespace ringlet::topology {
namespace {

using common::even_offset;
using common::even_share;

// One NUMA node with its cores, in hwloc order; a node that spans packages
// collects the cores of all of them.
struct Node {
  int os_index = -1;
  int package = -1;  // the first package it is under
  std::vector<const Core*> cores;
  size_t pus = 0;
};

std::vector<Node> nodes_with_cores(const Host& host) {
  std::vector<Node> nodes;
  for (const Package& p : host.packages) {
    for (const NumaNode& n : p.numa_nodes) {
      auto it = std::find_if(nodes.begin(), nodes.end(),
                             [&](const Node& x) { return x.os_index == n.os_index; });
      if (it == nodes.end()) {
        nodes.push_back({n.os_index, p.os_index, {}, 0});
        it = nodes.end() - 1;
      }
      for (const Core& c : n.cores) {
        it->cores.push_back(&c);
        it->pus += c.pus.size();
      }
    }
  }
  std::erase_if(nodes, [](const Node& n) { return n.cores.empty(); });
  return nodes;
}

// How far node b is from node a: hwloc's latency where the host reports it
// for every pair, else 0 within a package and 1 across.
struct NodeCost {
  const Host& host;
  const std::vector<Node>& nodes;
  bool distances = true;

  NodeCost(const Host& h, const std::vector<Node>& n) : host(h), nodes(n) {
    for (const Node& a : nodes) {
      for (const Node& b : nodes) distances &= host.numa_distance(a.os_index, b.os_index) >= 0;
    }
  }
  int64_t operator()(size_t a, size_t b) const {
    if (distances) return host.numa_distance(nodes[a].os_index, nodes[b].os_index);
    return nodes[a].package == nodes[b].package ? 0 : 1;
  }
};

void add_pus(Placement& p, const Core& core) {
  p.cores.push_back(core.index);
  p.pus.insert(p.pus.end(), core.pus.begin(), core.pus.end());
}

void finish(Placement& p) {
  std::sort(p.cores.begin(), p.cores.end());
  std::sort(p.pus.begin(), p.pus.end());
  p.pus.erase(std::unique(p.pus.begin(), p.pus.end()), p.pus.end());
}

// Node `node`'s cores among `ranks` (local ranks, ascending).
void split_node(const Node& node, const std::vector<int>& ranks, std::vector<Placement>& out) {
  const size_t m = ranks.size(), k = node.cores.size();
  if (m == 0) return;
  if (m <= k) {
    // A contiguous block of cores each: neighbouring cores often share a cache.
    for (size_t j = 0; j < m; ++j) {
      Placement& p = out[ranks[j]];
      p.numa_node = node.os_index;
      for (size_t c = 0; c < even_share(k, m, j); ++c)
        add_pus(p, *node.cores[even_offset(k, m, j) + c]);
      finish(p);
    }
    return;
  }
  if (m <= node.pus) {
    // More ranks than cores, not than PUs: a contiguous block of PUs each, so
    // neighbours share a core but never a PU.
    std::vector<std::pair<int, int>> pus;  // (PU, its core's index), in core order
    for (const Core* c : node.cores) {
      for (int pu : c->pus) pus.emplace_back(pu, c->index);
    }
    for (size_t j = 0; j < m; ++j) {
      Placement& p = out[ranks[j]];
      p.numa_node = node.os_index;
      for (size_t i = 0; i < even_share(pus.size(), m, j); ++i) {
        const auto& [pu, core] = pus[even_offset(pus.size(), m, j) + i];
        p.pus.push_back(pu);
        if (std::find(p.cores.begin(), p.cores.end(), core) == p.cores.end())
          p.cores.push_back(core);
      }
      finish(p);
    }
    return;
  }
  // More ranks than PUs: each may run on the whole node. Pinned to single
  // PUs, an uneven count (3 ranks on 2 PUs) would leave two ranks at half a
  // PU each while the third had one; the scheduler shares them evenly, and
  // the ring runs at its slowest rank's pace.
  for (int r : ranks) {
    Placement& p = out[r];
    p.numa_node = node.os_index;
    p.shared = true;
    for (const Core* c : node.cores) add_pus(p, *c);
    finish(p);
  }
}

size_t common_prefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// The NIC of each rank (Placement::nic), once its cores are known.
void choose_nics(const Host& host, std::vector<Placement>& out,
                 const std::vector<std::vector<int>>& nodes_of_rank) {
  std::map<std::vector<int>, size_t> turns;  // equally close NICs -> ranks that took one
  for (Placement& p : out) {
    // A NIC's closeness as a tuple compared in order; nullopt: not close.
    std::vector<std::pair<std::vector<size_t>, int>> close;
    for (size_t i = 0; i < host.nics.size(); ++i) {
      const PciDevice& nic = host.nics[i];
      std::vector<size_t> score;
      if (p.gpu >= 0 && (host.gpus[p.gpu].numa_node >= 0 || !host.gpus[p.gpu].pci_path.empty())) {
        const PciDevice& gpu = host.gpus[p.gpu];
        const size_t shared = common_prefix(gpu.pci_path, nic.pci_path);
        const bool same_node = gpu.numa_node >= 0 && nic.numa_node == gpu.numa_node;
        if (shared == 0 && !same_node) continue;
        score = {shared, same_node ? 1u : 0u};
      } else {
        const auto& mine = nodes_of_rank[p.local_rank];
        if (std::find(mine.begin(), mine.end(), nic.numa_node) == mine.end()) continue;
      }
      score.push_back(nic.rdma ? 1 : 0);
      close.emplace_back(std::move(score), static_cast<int>(i));
    }
    if (close.empty()) continue;
    const auto best = std::max_element(close.begin(), close.end())->first;
    std::vector<int> tied;
    for (const auto& [score, i] : close) {
      if (score == best) tied.push_back(i);
    }
    p.nic = tied[turns[tied]++ % tied.size()];
  }
}

}  // namespace

std::vector<Placement> place_local_ranks(const Host& host, int local_ranks,
                                         const std::vector<int>& gpus) {
  const size_t R = static_cast<size_t>(std::max(local_ranks, 0));
  std::vector<Placement> out(R);
  for (size_t r = 0; r < R; ++r) {
    out[r].local_rank = static_cast<int>(r);
    if (host.gpus.empty()) continue;
    const bool given =
        r < gpus.size() && gpus[r] >= 0 && static_cast<size_t>(gpus[r]) < host.gpus.size();
    out[r].gpu = given ? gpus[r] : static_cast<int>(r % host.gpus.size());
  }
  const std::vector<Node> nodes = nodes_with_cores(host);
  std::vector<std::vector<int>> nodes_of_rank(R);  // OS indexes, for the NIC
  if (nodes.empty() || R == 0) {
    choose_nics(host, out, nodes_of_rank);
    return out;
  }
  const size_t N = nodes.size();

  // The home node of each rank: its GPU's, else round-robin.
  std::vector<size_t> home(R, N);
  for (size_t r = 0; r < R; ++r) {
    if (out[r].gpu < 0) continue;
    const int want = host.gpus[out[r].gpu].numa_node;
    for (size_t i = 0; i < N; ++i) {
      if (nodes[i].os_index == want) home[r] = i;
    }
  }
  const size_t unhomed = static_cast<size_t>(std::count(home.begin(), home.end(), N));
  if (unhomed == R && R < N) {
    // Fewer ranks than nodes: whole nodes each, evenly, in order.
    for (size_t r = 0; r < R; ++r) {
      Placement& p = out[r];
      const size_t first = even_offset(N, R, r), count = even_share(N, R, r);
      for (size_t i = first; i < first + count; ++i) {
        for (const Core* c : nodes[i].cores) add_pus(p, *c);
        nodes_of_rank[r].push_back(nodes[i].os_index);
      }
      p.numa_node = count == 1 ? nodes[first].os_index : -1;
      finish(p);
    }
    choose_nics(host, out, nodes_of_rank);
    return out;
  }
  size_t turn = 0;
  for (size_t r = 0; r < R; ++r) {
    if (home[r] == N) home[r] = turn++ % N;
  }

  // Room on each node: its PUs, times how many ranks each PU of the host
  // must carry anyway. A node past it hands its last ranks to the nearest
  // node with room, so that no two ranks share a PU while another is free.
  size_t total_pus = 0;
  for (const Node& n : nodes) total_pus += n.pus;
  const size_t per_pu = std::max<size_t>(1, (R + total_pus - 1) / std::max<size_t>(total_pus, 1));
  std::vector<size_t> demand(N, 0);
  for (size_t h : home) ++demand[h];
  const NodeCost cost(host, nodes);
  for (size_t from = 0; from < N; ++from) {
    for (size_t r = R; r-- > 0 && demand[from] > nodes[from].pus * per_pu;) {
      if (home[r] != from) continue;
      size_t to = N;
      for (size_t i = 0; i < N; ++i) {
        if (i == from || demand[i] >= nodes[i].pus * per_pu) continue;
        if (to == N || cost(from, i) < cost(from, to)) to = i;
      }
      if (to == N) break;
      home[r] = to;
      --demand[from];
      ++demand[to];
    }
  }

  for (size_t i = 0; i < N; ++i) {
    std::vector<int> ranks;
    for (size_t r = 0; r < R; ++r) {
      if (home[r] == i) {
        ranks.push_back(static_cast<int>(r));
        nodes_of_rank[r] = {nodes[i].os_index};
      }
    }
    split_node(nodes[i], ranks, out);
  }
  choose_nics(host, out, nodes_of_rank);
  return out;
}

std::vector<int> numa_ring_order(const Host& host) {
  const std::vector<Node> nodes = nodes_with_cores(host);
  std::vector<int> order;
  if (nodes.empty()) return order;
  const NodeCost cost(host, nodes);
  std::vector<bool> seen(nodes.size(), false);
  size_t at = 0;
  for (;;) {
    seen[at] = true;
    order.push_back(nodes[at].os_index);
    size_t next = nodes.size();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!seen[i] && (next == nodes.size() || cost(at, i) < cost(at, next))) next = i;
    }
    if (next == nodes.size()) return order;
    at = next;
  }
}

int ring_locality(const Host& host, int numa_node) {
  if (numa_node < 0) return -1;
  const std::vector<int> order = numa_ring_order(host);
  const auto it = std::find(order.begin(), order.end(), numa_node);
  return it == order.end() ? -1 : static_cast<int>(it - order.begin());
}

int numa_node_of(const Host& host, const std::vector<int>& cpus) {
  if (cpus.empty()) return -1;
  for (const Node& n : nodes_with_cores(host)) {
    std::vector<int> pus;
    for (const Core* c : n.cores) pus.insert(pus.end(), c->pus.begin(), c->pus.end());
    std::sort(pus.begin(), pus.end());
    const bool all = std::all_of(cpus.begin(), cpus.end(), [&](int cpu) {
      return std::binary_search(pus.begin(), pus.end(), cpu);
    });
    if (all) return n.os_index;
  }
  return -1;
}

std::vector<int> ring_order(const std::vector<std::vector<int>>& ranks_on_host,
                            const std::vector<int>& locality) {
  std::vector<int> ring;
  for (std::vector<int> host : ranks_on_host) {
    const auto key = [&locality](int r) {
      return r >= 0 && static_cast<size_t>(r) < locality.size() ? locality[r] : -1;
    };
    std::stable_sort(host.begin(), host.end(), [&](int a, int b) { return key(a) < key(b); });
    ring.insert(ring.end(), host.begin(), host.end());
  }
  return ring;
}

}  // namespace ringlet::topology
