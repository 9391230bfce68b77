// RAII owners of the CUDA objects the device collectives hold, and the one
// way they turn a CUDA error into a RuntimeError naming the rank, the device
// and the call. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

namespace ringlet::core::gpu {

// Throws RuntimeError(kInternal) "cuda:<device>: <what> failed: <CUDA's text>"
// unless err is cudaSuccess.
void check_cuda(cudaError_t err, int rank, int device, const char* what);

// Makes `device` current for its lifetime, then restores the caller's.
class DeviceScope {
 public:
  DeviceScope(int device, int rank);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// cudaMalloc'd memory of one device, grown on demand (contents not kept).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory() { release(); }
  DeviceMemory(DeviceMemory&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // At least `bytes` on the current device; reallocates (after the device's
  // pending work that may use the old memory is done) only to grow.
  void reserve(size_t bytes, int rank, int device);
  void* get() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void release();
  void* data_ = nullptr;
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

}  // namespace ringlet::core::gpu
