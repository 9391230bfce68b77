// The GPU a rank drives, so that its cores, its NIC and its place in the ring
// follow that GPU. A rank drives CUDA device `local_rank % devices` (the
// frameworks' convention, `torch.cuda.set_device(hvd.local_rank())`), and
// which physical GPU that is depends on how CUDA numbers the devices it lets
// the process see: CUDA_VISIBLE_DEVICES (launchers that give each rank its own
// GPU set it: Slurm's --gpus-per-task, Kubernetes, Ray) and CUDA_DEVICE_ORDER.
// Where the CUDA driver answers (cuda_driver.h), it says, by PCI bus id; where
// it does not, CUDA's rules are applied to the topology's GPUs, and the answer
// may be a guess.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ringlet/topology/topology.h"

namespace ringlet::topology {

// One device as the CUDA driver of this process enumerates it; its ordinal
// is its place in the driver's list.
struct CudaDevice {
  std::string bus_id;  // as the driver writes it: "0000:3B:00.0" (any case, 4 or 8 domain digits)
  std::string uuid;    // "GPU-8f1e2a3b-...", "" where not known
  bool operator==(const CudaDevice&) const = default;
};

// CUDA's two variables as this process has them; nullopt = unset.
struct CudaSettings {
  std::optional<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES
  std::optional<std::string> device_order;     // CUDA_DEVICE_ORDER
};

struct VisibleGpu {
  int gpu = -1;          // index into Host::gpus; -1 where none can be placed
  bool guessed = false;  // CUDA's order was inferred, not reported by its driver
  std::string how;       // how it was derived, or why none: one clause for the info line
};

// The topology's GPU that local rank `local_rank` drives.
//
// With `driver` (the devices CUDA's driver lists for this process, in its
// order): device `local_rank % devices`, found in the topology by its PCI bus
// id (else its UUID). Where the driver lists none, or that device is not in
// the topology (a RINGLET_TOPO_FILE of another machine), CUDA's rules below
// apply instead, and `how` says why.
//
// Without it, CUDA's rules against the topology's GPUs (those of NVIDIA's
// vendor id, or of none known):
// - the order CUDA numbers them in: PCI bus order under
//   CUDA_DEVICE_ORDER=PCI_BUS_ID; fastest first otherwise (unset, or any
//   other value), which for GPUs of one model is taken as PCI bus order, and
//   is a guess (for GPUs of several models, a worse one);
// - CUDA_VISIBLE_DEVICES unset: every GPU, in that order; set: a list whose
//   first entry says its kind. Indexes into that order, each read as strtoul
//   reads it ("1x" is 1); UUIDs (GPU-...) or unique prefixes of them, matched
//   against the topology's UUIDs; MIG devices (MIG-GPU-<uuid>/<gi>/<ci> is
//   its GPU's; MIG-<uuid> names none the topology lists), of which CUDA
//   enumerates the first only. The list ends at the first entry CUDA would
//   not take (a word, an entry of another kind, a negative or absent index,
//   an ambiguous or unknown UUID); a device named twice hides every one.
// Indexes are a guess unless the order is PCI_BUS_ID; UUIDs are not.
VisibleGpu visible_gpu(const Host& host, const CudaSettings& cuda,
                       const std::optional<std::vector<CudaDevice>>& driver, int local_rank);

// A PCI bus id as one number (domain, bus, device, function), whatever its
// case and domain width; nullopt where it is not one.
std::optional<uint64_t> pci_bus_key(const std::string& bus_id);

}  // namespace ringlet::topology
