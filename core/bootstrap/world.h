// The job as every rank agrees on it after rendezvous: ranks, hosts, and the
// order of the ring (each host's ranks contiguous, hosts in order of their
// lowest rank; within a host, ranks of one NUMA node together, once the ranks
// have told where they run).
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
  // Per global rank: where on its host it runs, as the ring orders a host's
  // ranks (topology::ring_locality: its NUMA node's place in the host's
  // order; -1 unknown). Empty until exchange_locality.
  std::vector<int> locality;
  bool single_host() const { return cross_size == 1; }
};

// Exchanges hostnames through the store and derives the rest. A rank's host
// is gethostname(), or RINGLET_HOSTNAME where set (tests use it to simulate
// several hosts on one machine). Checks the result against the launcher's
// local hints and fails naming the variable on disagreement.
World build_world(const LaunchInfo& launch, StoreClient& store, transport::Deadline deadline);

// The pure part of build_world: everything that follows from each rank's
// hostname and, where given, its locality (job_id left empty).
World derive_world(int rank, const std::vector<std::string>& hostnames,
                   const std::vector<int>& locality = {});

// Every rank tells the GPU it drives (visible_gpu_of_this_rank; -1 for the
// default), and learns those of its host's ranks: the result is by local
// rank, the same on every rank of the host.
std::vector<int> exchange_visible_gpus(const World& w, int gpu, StoreClient& store,
                                       transport::Deadline deadline);

// Every rank tells its locality (rank 0 gathers them and publishes them as one
// value); fills w.locality and orders w.ring by it. Collective; throws
// transport::Timeout naming the rank not heard from by `deadline`.
void exchange_locality(World& w, int locality, StoreClient& store, transport::Deadline deadline);

}  // namespace ringlet::core
