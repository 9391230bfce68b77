// The launch shape's one device query, cached per device.
#include <atomic>

#include "device_types.cuh"

namespace ringlet::kernels::cuda::detail {

unsigned resident_blocks() {
  constexpr int kMaxDevices = 64;
  constexpr unsigned kFallback = 1024;  // about an H100's or H200's figure
  static std::atomic<unsigned> cached[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    (void)cudaGetLastError();  // the launch that follows reports the real error
    return kFallback;
  }
  unsigned blocks = cached[device].load(std::memory_order_relaxed);
  if (blocks != 0) return blocks;
  int processors = 0, threads = 0;
  if (cudaDeviceGetAttribute(&processors, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return kFallback;
  }
  const int per_processor = threads / kThreads > 0 ? threads / kThreads : 1;
  blocks = static_cast<unsigned>(processors > 0 ? processors * per_processor : kFallback);
  cached[device].store(blocks, std::memory_order_relaxed);
  return blocks;
}

}  // namespace ringlet::kernels::cuda::detail
