#include "core/gpu/cuda_resources.h"

#include "core/runtime/runtime_error.h"

namespace ringlet::core::gpu {

using runtime::ErrorKind;
using runtime::RuntimeError;

void check_cuda(cudaError_t err, int rank, int device, const char* what) {
  if (err == cudaSuccess) return;
  // A device that is not there is the caller's tensor naming it, not a fault
  // of the collective.
  const bool no_such_device = err == cudaErrorNoDevice || err == cudaErrorInvalidDevice ||
                              err == cudaErrorInsufficientDriver;
  throw RuntimeError(no_such_device ? ErrorKind::kInvalidArgument : ErrorKind::kInternal, rank,
                     "cuda:" + std::to_string(device) + ": " + what +
                         " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                         ")" + (no_such_device ? "; this process sees no such CUDA device" : ""));
}

DeviceScope::DeviceScope(int device, int rank) {
  check_cuda(cudaGetDevice(&previous_), rank, device, "cudaGetDevice");
  if (previous_ != device) check_cuda(cudaSetDevice(device), rank, device, "cudaSetDevice");
}

DeviceScope::~DeviceScope() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) {
    (void)cudaSetDevice(previous_);
  }
}

void DeviceMemory::reserve(size_t bytes, int rank, int device) {
  if (bytes <= bytes_) return;
  // Work queued on any stream may still read the old buffer.
  if (data_ != nullptr) check_cuda(cudaDeviceSynchronize(), rank, device, "cudaDeviceSynchronize");
  release();
  check_cuda(cudaMalloc(&data_, bytes), rank, device,
             ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  bytes_ = bytes;
}

void DeviceMemory::release() {
  if (data_ != nullptr) (void)cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
}

Stream::Stream(int rank, int device) {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), rank, device,
             "cudaStreamCreateWithFlags");
}
Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Event::Event(int rank, int device) {
  check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), rank, device,
             "cudaEventCreateWithFlags");
}
Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

}  // namespace ringlet::core::gpu
