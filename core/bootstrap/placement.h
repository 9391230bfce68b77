// This rank's place on its host, decided at init from the topology (hwloc's
// view of this machine, or the saved one RINGLET_TOPO_FILE names): the cores
// it binds to (RINGLET_BIND), where it sits in its host's part of the ring,
// the NIC its TCP links use, and the machine's figures the algorithms tune by.
// Every decision is logged at info level (HOROVOD_LOG_LEVEL=info).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/config.h"
#include "ringlet/topology/binding.h"
#include "ringlet/topology/placement.h"
#include "ringlet/topology/topology.h"

namespace ringlet::core {

// RINGLET_TOPO_FILE's topology, else this machine's. A file that cannot be
// loaded is a ConfigError naming the variable and the file; discovery that
// fails is a warning and nullopt: the rank then runs unplaced, as it would
// without hwloc.
std::optional<topology::Host> load_host_topology(const Config& config, int rank);

struct RankPlacement {
  topology::Placement placement;  // what the topology gives it; empty without one
  topology::Binding binding;      // what it did about it
  int locality = -1;              // its place in the ring within its host (World::locality)
  size_t llc_bytes = 0;           // last-level cache of the package it runs on; 0 = not known
  int host_cpus = 0;              // CPUs of this machine the topology lists; 0 = not known
};

// Places local rank `local_rank` of `local_size` on `host` and binds the
// process as RINGLET_BIND says (never failing init over it: a refused
// binding is a warning). A process that an earlier init() bound is judged
// by the affinity it had before, not as started bound.
RankPlacement place_this_rank(const std::optional<topology::Host>& host, const Config& config,
                              int local_rank, int local_size, const std::vector<int>& gpus);

// The GPU (index into the host's GPUs) this rank drives: CUDA device
// `local_rank % devices`, as the CUDA driver reports it where one answers,
// else by CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER read with CUDA's rules
// (topology::visible_gpu); -1 where none can be placed. An info line says
// which, how it was derived, and whether it is a guess. Every local rank's,
// shared through the store (exchange_visible_gpus), is the `gpus` that
// place_this_rank takes.
int visible_gpu_of_this_rank(const std::optional<topology::Host>& host, int local_rank);

// The IPv4 address this rank's TCP links should listen on: that of the
// interface of the NIC nearest it, where that interface reaches rank 0
// (`rank0_host`, its rendezvous host) by topology::nic_interface's rule; ""
// keeps today's rule (the address `store_local_address` reached rank 0 from).
std::string nic_address(const std::optional<topology::Host>& host, const RankPlacement& placed,
                        int local_rank, const std::string& rank0_host,
                        const std::string& store_local_address);

}  // namespace ringlet::core
