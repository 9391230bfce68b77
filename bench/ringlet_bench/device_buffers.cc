#include "device_buffers.h"

#include <stdexcept>
#include <string>

#if RINGLET_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ringlet::bench {

#if RINGLET_BENCH_CUDA
namespace {

void check(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) {
    throw std::runtime_error("--device cuda: " + what + " failed: " + cudaGetErrorString(err));
  }
}

class CudaBuffers final : public DeviceBuffers {
 public:
  CudaBuffers(int local_rank, size_t send_bytes, size_t recv_bytes) {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    if (devices == 0) throw std::runtime_error("--device cuda: this process sees no CUDA device");
    device_ = local_rank % devices;
    check(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
    check(cudaMalloc(&send_, send_bytes == 0 ? 1 : send_bytes), "cudaMalloc");
    check(cudaMalloc(&recv_, recv_bytes == 0 ? 1 : recv_bytes), "cudaMalloc");
  }
  ~CudaBuffers() override {
    cudaFree(send_);
    cudaFree(recv_);
  }
  void* send() const override { return send_; }
  void* recv() const override { return recv_; }
  int device() const override { return device_; }
  void upload(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes) override {
    check(cudaMemcpy(send_, send, send_bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
    check(cudaMemcpy(recv_, recv, recv_bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }
  void download(void* recv, size_t recv_bytes) override {
    check(cudaMemcpy(recv, recv_, recv_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }

 private:
  int device_ = 0;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceBuffers> make_device_buffers(int local_rank, size_t send_bytes,
                                                   size_t recv_bytes) {
  return std::make_unique<CudaBuffers>(local_rank, send_bytes, recv_bytes);
}

void device_copy(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy on the device");
}
#else
std::unique_ptr<DeviceBuffers> make_device_buffers(int, size_t, size_t) {
  throw std::runtime_error("--device cuda: this build has no CUDA");
}

void device_copy(void*, const void*, size_t) {
  throw std::runtime_error("--device cuda: this build has no CUDA");
}
#endif

}  // namespace ringlet::bench
