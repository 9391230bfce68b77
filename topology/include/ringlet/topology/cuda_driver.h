// The devices the CUDA driver lets this process see, in its order, each with
// its PCI bus id and UUID: what visible_gpu() maps to the topology's GPUs.
// The driver (libcuda.so.1) is loaded with dlopen at run time, so that no
// build of Ringlet needs CUDA to load or to link, and nothing is asked of it
// where it is absent.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ringlet/topology/visible_gpu.h"

namespace ringlet::topology {

struct CudaDriverDevices {
  // nullopt where no driver answered (then `why_not` says why); empty where
  // it answered that this process sees no device (CUDA_VISIBLE_DEVICES=-1).
  std::optional<std::vector<CudaDevice>> devices;
  std::string why_not;
};

// Asked once per process (cuInit, then each device's PCI bus id and UUID;
// no context is created), then remembered: CUDA reads CUDA_VISIBLE_DEVICES
// and CUDA_DEVICE_ORDER once, at cuInit, so the answer cannot change.
const CudaDriverDevices& cuda_driver_devices();

// A GPU's 16-byte UUID as nvidia-smi and CUDA_VISIBLE_DEVICES write it:
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string uuid_text(std::span<const unsigned char, 16> bytes);

}  // namespace ringlet::topology
