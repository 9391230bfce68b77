// A build with CUDA and NCCL: what serves device tensors under each
// HOROVOD_GPU_OPERATIONS, and what is refused by name.
#include "core/gpu/device_collectives.h"

#include "core/gpu/cuda_resources.h"

namespace ringlet::core::gpu {

std::string device_refusal(GpuOperations operations, bool reduces, DataType dtype, int device) {
  const std::string where = "device tensors (cuda:" + std::to_string(device) + ")";
  switch (operations) {
    case GpuOperations::kMpi:
      return where +
             ": HOROVOD_GPU_OPERATIONS=MPI needs a CUDA-aware MPI, which this build does "
             "not use; HOROVOD_GPU_OPERATIONS=NCCL or RING is served";
    case GpuOperations::kRing:
      // Every collective, and the CUDA kernels reduce every dtype.
      return "";
    case GpuOperations::kNccl:
      break;
  }
  // Broadcast, allgather and alltoall move bytes: every dtype goes.
  if (!reduces) return "";
  if (!nccl_has_type(dtype)) {
    return where + ": NCCL has no " + std::string(to_string(dtype)) +
           " type to reduce (reduce it on the host, as int32, or with "
           "HOROVOD_GPU_OPERATIONS=RING)";
  }
  return "";
}

std::shared_ptr<Event> record_ready(int rank, int device, void* stream) {
  DeviceScope scope(device, rank);
  std::shared_ptr<Event> ready = pooled_event(rank, device);
  check_cuda(cudaEventRecord(ready->get(), static_cast<cudaStream_t>(stream)), rank, device,
             "cudaEventRecord on the tensor's stream");
  return ready;
}

std::unique_ptr<DeviceCollectives> make_device_collectives(int rank, const Config& config) {
  if (config.gpu_operations == GpuOperations::kRing) {
    return make_ipc_device_collectives(rank, config);
  }
  return make_nccl_device_collectives(rank);
}

}  // namespace ringlet::core::gpu
