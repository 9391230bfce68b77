// A build without CUDA or without NCCL: no device collectives. Every device
// tensor is refused at submission, naming what is missing.
#include "core/gpu/device_collectives.h"

namespace ringlet::core::gpu {

std::string device_refusal(GpuOperations operations, bool, DataType, int device) {
#if defined(RINGLET_HAVE_CUDA)
  const char* missing = "NCCL (RINGLET_WITH_NCCL)";
#else
  const char* missing = "CUDA (RINGLET_WITH_CUDA)";
#endif
  return "device tensors (cuda:" + std::to_string(device) +
         ") are not served by this build: it was built without " + missing +
         " (HOROVOD_GPU_OPERATIONS=" + std::string(to_string(operations)) + ")";
}

std::shared_ptr<Event> record_ready(int, int, void*) { return nullptr; }

std::unique_ptr<DeviceCollectives> make_device_collectives(int, const Config&) { return nullptr; }

}  // namespace ringlet::core::gpu
