// RAII owners of the CUDA objects the device collectives hold, and the one
// way they turn a CUDA error into a Failure naming the rank, the device
// and the call. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <new>
#include <string>

// allocate_result: the results' memory, reached through this header.
#include "core/gpu/cuda_result_pool.h"

namespace ringlet::core::gpu {

// Throws a Failure(kInternal) "cuda:<device>: <what> failed: <CUDA's text>"
// unless err is cudaSuccess.
void check_cuda(cudaError_t err, int rank, int device, const char* what);

// Makes `device` current on the calling thread, for good: the runtime's and
// the finalizer's threads belong to Ringlet and hold the rank's device from
// their first device call on. A thread that never chose a device sits on
// device 0 without a context there; any CUDA call from it would make one on
// GPU 0 in every rank (memory gone on GPU 0 first; under exclusive-process
// mode an error left pending).
void use_device(int device, int rank);

// Whether `device` holds its primary context in this process (the driver's
// cuDevicePrimaryCtxGetState, found at run time); false where the driver
// cannot say.
bool has_primary_context(int device);

// On a caller's thread (a submission, a result let go): makes `device`
// current for its lifetime, then the caller's device again, but only where
// that device has a context already: switching back to a device this process
// never used would make a context there (PyTorch's rule, its MaybeSetDevice).
class DeviceScope {
 public:
  DeviceScope(int device, int rank);
  // For destructors: an error switching leaves the device as it was.
  DeviceScope(int device, std::nothrow_t) noexcept;
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// Device memory used in one stream's order, grown on demand (contents not
// kept). It is allocated and freed in that order (cudaMallocAsync,
// cudaFreeAsync), so growing it never waits for the device: the old block is
// freed once the work queued before on the stream is done.
class DeviceMemory {
 public:
  explicit DeviceMemory(cudaStream_t stream) : stream_(stream) {}
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // At least `bytes`, on the stream's device.
  void reserve(size_t bytes, int rank, int device);
  void* get() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  cudaStream_t stream_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory, grown on demand (contents not kept): what the
// device copies to and from the host asynchronously. The caller makes sure
// that no queued copy still uses it when it grows or goes.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  ~PinnedMemory();
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;

  bool holds(size_t bytes) const { return bytes <= bytes_; }
  // At least `bytes`.
  void reserve(size_t bytes, int rank, int device);
  std::byte* get() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

// A non-blocking stream of the current device.
class Stream {
 public:
  Stream(int rank, int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A timing-free event of the current device.
class Event {
 public:
  Event(int rank, int device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// An event of `device` (current) from a pool that takes it back when the last
// owner lets go: a submission and a collective each need one, and creating
// them would put a driver call on every submission. Thread-safe.
std::shared_ptr<Event> pooled_event(int rank, int device);

}  // namespace ringlet::core::gpu
