// The groups of a hierarchical collective: the ranks of one host, and the
// ranks at one index within their hosts, one per host. Each is a process
// set's communicator over the world's links (create_subset), so it shares the
// world's carriers, its waiting and its failure, and gets a shared window
// where its ranks share a host.
#include <algorithm>
#include <string>
#include <vector>

#include "core/communicator.h"

namespace ringlet::core {

Communicator::HostGroups Communicator::host_groups() {
  if (host_group_ == nullptr) {
    Communicator& world = parent_ != nullptr ? *parent_ : *this;
    const World& w = world_;
    // Named after this communicator and the host or index, the same on every
    // member and unique in the job (the window's segments are named after it).
    const std::string base = name_.empty() ? std::string("world") : name_;
    std::vector<int> host;
    for (int r : w.ranks_on_host[w.cross_rank]) host.push_back(global_rank(r));
    std::vector<int> cross;
    for (const std::vector<int>& ranks : w.ranks_on_host) {
      if (static_cast<int>(ranks.size()) > w.local_rank) cross.push_back(global_rank(ranks[w.local_rank]));
    }
    std::sort(cross.begin(), cross.end());
    // Every rank builds its host's group first: a host's group needs only
    // that host's ranks, so no rank can wait on another busy with the cross
    // group.
    host_group_ = create_subset(world, host, base + ".host" + std::to_string(w.cross_rank));
    cross_group_ = create_subset(world, cross, base + ".cross" + std::to_string(w.local_rank));
  }
  return {host_group_.get(), cross_group_.get()};
}

}  // namespace ringlet::core
