// The ring and the bindings a job would get: ranks on hosts as ringletrun
// places them (-H, --hostfile: hosts in the order named, each host's ranks
// together), every host taken to look like the topology shown, each rank
// placed as init() places it with RINGLET_BIND=auto in a process started
// unbound, and the ring in the order init() derives.
#pragma once

#include <string>
#include <vector>

#include "hosts.h"
#include "ringlet/topology/placement.h"
#include "ringlet/topology/topology.h"

namespace ringlet_topo {

struct RankRow {
  int rank = 0;
  std::string host;  // as named; this machine's name for local ranks
  int host_index = 0;
  int local_rank = 0;
  int local_size = 1;
  ringlet::topology::Placement placement;
};

struct JobPlan {
  std::vector<RankRow> ranks;
  std::vector<std::string> hosts;  // by host index
  std::vector<int> ring;           // global ranks in ring order
};

JobPlan plan_job(const ringlet::topology::Host& host,
                 const std::vector<ringletrun::RankPlace>& places, const std::string& this_host);

}  // namespace ringlet_topo
