// Where each local rank of one host should run: a core, and the GPU and NIC
// closest to it. The ring within a host visits local ranks in ascending order.
#pragma once

#include <vector>

#include "ringlet/topology/topology.h"

namespace ringlet::topology {

struct Placement {
  int local_rank = 0;
  int numa_node = -1;  // OS index of the NUMA node of `core`
  int core = -1;       // Core::index; -1 when the host has no cores listed
  std::vector<int> pus;  // the core's PUs, for sched_setaffinity
  int gpu = -1;        // index into Host::gpus, -1 if none
  int nic = -1;        // index into Host::nics, -1 if none
};

// Ranks go round-robin over NUMA nodes (so memory bandwidth is shared
// evenly), and round-robin over the cores of each node. With GPUs, rank r
// takes GPU r % gpus and a core on that GPU's NUMA node, so its copies do not
// cross the inter-socket link. Oversubscribed hosts reuse cores in the same order.
std::vector<Placement> place_local_ranks(const Host& host, int local_ranks);

// The ring within one host: local ranks ascending.
std::vector<int> local_ring(int local_ranks);

}  // namespace ringlet::topology
