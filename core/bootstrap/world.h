// The job as every rank agrees on it after rendezvous: ranks, hosts, and the
// order of the ring (each host's ranks contiguous, hosts in order of their
// lowest rank).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/bootstrap/store.h"

namespace ringlet::core {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;   // index of this host
  int cross_size = 1;   // number of hosts
  std::string job_id;
  std::vector<std::string> hostnames;   // per global rank
  std::vector<int> host_of;             // per global rank: host index
  std::vector<std::vector<int>> ranks_on_host;  // per host: global ranks, ascending
  std::vector<int> ring;                // ring order of global ranks
  bool single_host() const { return cross_size == 1; }
};

// Exchanges hostnames through the store and derives the rest. A rank's host
// is gethostname(), or RINGLET_HOSTNAME where set (tests use it to simulate
// several hosts on one machine). Checks the result against the launcher's
// local hints and fails naming the variable on disagreement.
World build_world(const LaunchInfo& launch, StoreClient& store, transport::Deadline deadline);

// The pure part of build_world: everything that follows from each rank's
// hostname (job_id left empty).
World derive_world(int rank, const std::vector<std::string>& hostnames);

}  // namespace ringlet::core
