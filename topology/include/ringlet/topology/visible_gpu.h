// The GPU a rank drives where CUDA_VISIBLE_DEVICES says which, so that its
// cores, its NIC and its place in the ring follow that GPU and not the
// default guess (local rank % GPUs). Launchers that give each rank its own
// GPU (Slurm's --gpus-per-task, Kubernetes, Ray) set it so.
#pragma once

#include <string>
#include <string_view>

#include "ringlet/topology/topology.h"

namespace ringlet::topology {

struct VisibleGpu {
  int gpu = -1;        // index into Host::gpus; -1 where the list names none the host can place
  std::string reason;  // why not, where gpu is -1
};

// The rank drives entry `local_rank % entries` of the list (so a list of
// one, the usual per-rank setting, is that GPU whatever the local rank),
// read with CUDA's rules: each entry an index in CUDA's order with nothing
// hidden, which for a host's GPUs of one model is PCI bus order; the list
// ends at the first
// entry that is not a visible index ("-1" hides every GPU). GPUs named by
// UUID (GPU-..., MIG-...) are not in the topology: gpu -1, saying so.
VisibleGpu visible_gpu(const Host& host, std::string_view cuda_visible_devices, int local_rank);

}  // namespace ringlet::topology
