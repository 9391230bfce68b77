#include "job_plan.h"

namespace ringlet_topo {

namespace topo = ringlet::topology;

JobPlan plan_job(const topo::Host& host, const std::vector<ringletrun::RankPlace>& places,
                 const std::string& this_host) {
  JobPlan plan;
  std::vector<std::vector<int>> ranks_on_host;
  for (size_t r = 0; r < places.size(); ++r) {
    const ringletrun::RankPlace& p = places[r];
    if (static_cast<size_t>(p.host_index) >= ranks_on_host.size()) {
      ranks_on_host.resize(p.host_index + 1);
      plan.hosts.resize(p.host_index + 1);
    }
    ranks_on_host[p.host_index].push_back(static_cast<int>(r));
    plan.hosts[p.host_index] = p.local() ? this_host : p.host;
  }
  plan.ranks.resize(places.size());
  std::vector<int> locality(places.size(), -1);
  for (size_t h = 0; h < ranks_on_host.size(); ++h) {
    const std::vector<int>& mine = ranks_on_host[h];
    const auto placement = topo::place_local_ranks(host, static_cast<int>(mine.size()));
    for (size_t l = 0; l < mine.size(); ++l) {
      RankRow& row = plan.ranks[mine[l]];
      row.rank = mine[l];
      row.host = plan.hosts[h];
      row.host_index = static_cast<int>(h);
      row.local_rank = static_cast<int>(l);
      row.local_size = static_cast<int>(mine.size());
      row.placement = placement[l];
      locality[mine[l]] = topo::ring_locality(host, placement[l].numa_node);
    }
  }
  plan.ring = topo::ring_order(ranks_on_host, locality);
  return plan;
}

}  // namespace ringlet_topo
