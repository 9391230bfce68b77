// Whether and where a rank binds itself, decided from its placement and what
// this machine and the process allow. A pure function, so that it can be
// tested against machines that are not there; affinity.h does the binding.
#pragma once

#include <string>
#include <vector>

#include "ringlet/topology/placement.h"
#include "ringlet/topology/topology.h"

namespace ringlet::topology {

enum class BindAction {
  kBind,        // bind to `cpus`
  kDisabled,    // RINGLET_BIND=none
  kUserBound,   // the process was started bound to fewer CPUs than the host has: left so
  kNotHere,     // none of the placement's CPUs is online here (a topology of another machine)
  kEverywhere,  // the placement is every CPU the process may use already
  kNoCores,     // the topology lists no cores
};

struct Binding {
  BindAction action = BindAction::kNoCores;
  std::vector<int> cpus;  // kBind: what to bind to (OS indexes, ascending)
  // The NUMA node the rank runs on, for the ring: its placement's where it is
  // bound (or would be, on the machine the topology describes); the node
  // holding its CPUs where it was bound before; else its GPU's; -1 unknown.
  int numa_node = -1;
};

// `enabled`: RINGLET_BIND=auto. `allowed`: the process's affinity at start
// (before any binding of ours). `online`: this machine's online CPUs. CPUs
// are OS indexes, ascending. The host's CPUs that are online here and that
// the process may not use mean that someone bound it already; placement CPUs
// that are not online here are dropped (a topology file of another machine).
Binding plan_binding(const Host& host, const Placement& placement, bool enabled,
                     const std::vector<int>& allowed, const std::vector<int>& online);

}  // namespace ringlet::topology
