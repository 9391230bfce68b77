#include "ringlet/topology/binding.h"

#include <algorithm>
#include <iterator>

namespace ringlet::topology {
namespace {

std::vector<int> intersect(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

Binding plan_binding(const Host& host, const Placement& placement, bool enabled,
                     const std::vector<int>& allowed, const std::vector<int>& online) {
  Binding b;
  const int gpu_node = placement.gpu >= 0 && static_cast<size_t>(placement.gpu) < host.gpus.size()
                           ? host.gpus[placement.gpu].numa_node
                           : -1;
  // Unbound, a rank runs anywhere: only its GPU says where it works.
  b.numa_node = gpu_node;
  if (!enabled) {
    b.action = BindAction::kDisabled;
    return b;
  }
  const std::vector<int> host_pus = host.pus();
  if (host_pus.empty() || placement.pus.empty()) {
    b.action = BindAction::kNoCores;
    return b;
  }
  // A launcher, numactl or taskset narrowed the process: theirs stands.
  const std::vector<int> here = intersect(host_pus, online);
  if (!std::includes(allowed.begin(), allowed.end(), here.begin(), here.end())) {
    b.action = BindAction::kUserBound;
    const int node = numa_node_of(host, allowed);
    if (node >= 0) b.numa_node = node;
    return b;
  }
  // From here the rank is placed where place_local_ranks says, on the
  // machine the topology describes, whether or not its CPUs are here.
  b.numa_node = placement.numa_node;
  const std::vector<int> target = intersect(intersect(placement.pus, online), allowed);
  if (target.empty()) {
    b.action = BindAction::kNotHere;
  } else if (target == allowed) {
    b.action = BindAction::kEverywhere;
  } else {
    b.action = BindAction::kBind;
    b.cpus = target;
  }
  return b;
}

}  // namespace ringlet::topology
