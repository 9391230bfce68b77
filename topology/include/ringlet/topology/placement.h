// Where each local rank of one host should run: the cores it is given, the
// GPU it drives, the NIC closest to it, and the order in which the ring
// visits the host's NUMA nodes. Pure functions of a Host, so that every rank
// of the host, and ringlet-topo, derive the same answer.
#pragma once

#include <vector>

#include "ringlet/topology/topology.h"

namespace ringlet::topology {

struct Placement {
  int local_rank = 0;
  int numa_node = -1;  // OS index of the NUMA node of its cores; -1 when they span several, or none
  std::vector<int> cores;  // Core::index of its cores, ascending; empty when the host lists none
  std::vector<int> pus;    // the OS indexes of the PUs it may run on (what sched_setaffinity takes)
  bool shared = false;  // other local ranks may run on the same PUs (more ranks than a node's PUs)
  int gpu = -1;         // index into Host::gpus, -1 if none
  int nic = -1;         // index into Host::nics of the NIC closest to it, -1 if none is close
};

// Each rank's NUMA node first: with GPUs, rank r drives GPU `gpus[r]` where
// that is given (>= 0: the GPU visible_gpu.h derived for it), else
// GPU r % gpus (the framework convention: device = local rank), and runs on
// that GPU's node, so
// that its copies do not cross the inter-socket link; without (or where the
// GPU's node is not known), ranks go round-robin over the nodes, so memory
// bandwidth is shared evenly. A node given more ranks than it has PUs (times
// the host's oversubscription) passes the last ones to the nearest node with
// room. Then each node's cores are split evenly, in order, among its ranks;
// where ranks outnumber a node's cores, its PUs are (neighbours share a core,
// never a PU); where they outnumber its PUs, each may run on the whole node
// and the scheduler shares it. With fewer ranks than nodes (and no GPU),
// each rank gets whole nodes. NIC: for a GPU, the one behind the
// same PCI switch (the longest common PCI path), else on the GPU's node;
// otherwise one on the rank's node; RDMA-capable ones first, and ranks with
// equally close NICs take turns among them.
std::vector<Placement> place_local_ranks(const Host& host, int local_ranks,
                                         const std::vector<int>& gpus = {});

// The host's NUMA nodes (OS indexes, those with cores) in the order the ring
// visits them: from the first node, always to the nearest one not visited yet
// (hwloc's NUMA distances; the package, where there are none), so that the
// ring crosses a slow link as few times as it can.
std::vector<int> numa_ring_order(const Host& host);

// A rank's place in that order (its ring locality), -1 when `numa_node` is
// not one of the host's nodes with cores.
int ring_locality(const Host& host, int numa_node);

// The NUMA node whose cores hold every one of `cpus` (OS indexes), or -1.
int numa_node_of(const Host& host, const std::vector<int>& cpus);

// The ring of a job: the hosts in the order given, each host's ranks together;
// within a host, ranks ordered by their locality (-1, unknown, first), and by
// rank where it is equal, so that ranks of one NUMA node are neighbours. With
// no locality known (or one node), a host's ranks ascend as given.
// `locality` is per global rank; empty means unknown everywhere.
std::vector<int> ring_order(const std::vector<std::vector<int>>& ranks_on_host,
                            const std::vector<int>& locality);

}  // namespace ringlet::topology
