#include "device.h"

#include <cstring>

#if RINGLET_TF_GPU
#include <cuda.h>
#include <cuda_runtime.h>

#include "xla/stream_executor/stream.h"
#endif

namespace ringlet::tensorflow_ops {

namespace tf = ::tensorflow;

#if RINGLET_TF_GPU
namespace {

// Whether `device` holds its primary context in this process (the driver's
// cuDevicePrimaryCtxGetState, found through the runtime so that nothing links
// libcuda); false where the driver cannot say.
bool has_primary_context(int device) {
  using GetState = CUresult (*)(CUdevice, unsigned int*, int*);
  static const GetState get_state = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 7000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return GetState{nullptr};
    }
    return reinterpret_cast<GetState>(fn);
  }();
  unsigned int flags = 0;
  int active = 0;
  return get_state != nullptr &&
         get_state(static_cast<CUdevice>(device), &flags, &active) == CUDA_SUCCESS && active != 0;
}

// Makes `device` this thread's current one for a scope, then the previous
// one again, but only where that one holds a context already: switching
// back to a device this process never used would make a context there (the
// core's DeviceScope keeps the same rule).
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) : device_(device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    if (saved_ == device_) return;
    cudaSetDevice(device_);
    if (saved_ >= 0 && !has_primary_context(saved_)) saved_ = -1;
  }
  ~CurrentDevice() {
    if (saved_ >= 0 && saved_ != device_) cudaSetDevice(saved_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int device_;
  int saved_ = -1;
};

absl::Status cuda_failure(const std::string& who, const char* call, cudaError_t error) {
  return absl::InternalError(who + ": " + call +
                             " failed on the GPU: " + cudaGetErrorString(error));
}

}  // namespace

OpDevice op_device(tf::OpKernelContext* ctx) {
  const auto* info = ctx->device()->tensorflow_accelerator_device_info();
  tf::DeviceContext* context = ctx->op_device_context();
  if (info == nullptr || context == nullptr || context->stream() == nullptr) return {};
  return {info->gpu_id, context->stream()->platform_specific_handle().stream};
}

absl::Status copy_within(const OpDevice& where, void* dst, const void* src, size_t bytes,
                         const std::string& who) {
  if (bytes == 0 || dst == src) return absl::OkStatus();
  if (where.ordinal < 0) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  CurrentDevice current(where.ordinal);
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                        static_cast<cudaStream_t>(where.stream));
  return e == cudaSuccess ? absl::OkStatus() : cuda_failure(who, "cudaMemcpyAsync", e);
}

absl::Status copy_result(const OpDevice& where, void* dst, const ringlet::Result& result,
                         const std::string& who) {
  if (result.device < 0) {
    if (!result.data.empty()) std::memcpy(dst, result.data.data(), result.data.size());
    return absl::OkStatus();
  }
  if (result.device_bytes == 0) return absl::OkStatus();
  CurrentDevice current(result.device);
  if (where.ordinal < 0) {
    // A device result for a host output: not a case the kernels make (a
    // GPU kernel's host-memory tensors are submitted as host tensors), but
    // a blocking copy is right for it.
    const cudaError_t e =
        cudaMemcpy(dst, result.device_data.get(), result.device_bytes, cudaMemcpyDefault);
    return e == cudaSuccess ? absl::OkStatus() : cuda_failure(who, "cudaMemcpy", e);
  }
  auto stream = static_cast<cudaStream_t>(where.stream);
  cudaError_t e = cudaMemcpyAsync(dst, result.device_data.get(), result.device_bytes,
                                  cudaMemcpyDeviceToDevice, stream);
  if (e != cudaSuccess) return cuda_failure(who, "cudaMemcpyAsync", e);
  // TensorFlow's streams do not block: the legacy stream, in whose order the
  // pool takes the memory back, waits for the copy explicitly.
  cudaEvent_t copied = nullptr;
  e = cudaEventCreateWithFlags(&copied, cudaEventDisableTiming);
  if (e != cudaSuccess) return cuda_failure(who, "cudaEventCreateWithFlags", e);
  e = cudaEventRecord(copied, stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(cudaStreamLegacy, copied, 0);
  // Destroying an event that a stream still waits for is allowed: CUDA frees
  // it once the wait is over.
  cudaEventDestroy(copied);
  if (e != cudaSuccess) {
    // Without the wait, the pool could reuse the memory while the copy still
    // reads it: finish the copy here instead.
    const cudaError_t sync = cudaStreamSynchronize(stream);
    if (sync != cudaSuccess) return cuda_failure(who, "cudaStreamSynchronize", sync);
  }
  return absl::OkStatus();
}

#else  // no GPU kernels in this build: every op runs on the CPU

OpDevice op_device(tf::OpKernelContext*) { return {}; }

absl::Status copy_within(const OpDevice&, void* dst, const void* src, size_t bytes,
                         const std::string&) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status copy_result(const OpDevice&, void* dst, const ringlet::Result& result,
                         const std::string& who) {
  if (result.device >= 0) {
    return absl::InternalError(who +
                               ": a device result, in an op library built without GPU "
                               "kernels");
  }
  if (!result.data.empty()) std::memcpy(dst, result.data.data(), result.data.size());
  return absl::OkStatus();
}

#endif

OpDevice placed(const OpDevice& op, tf::MemoryType memory) {
  return memory == tf::HOST_MEMORY ? OpDevice{} : op;
}

void place(ringlet::Tensor& view, const OpDevice& where) {
  view.device = where.ordinal;
  view.stream = where.ordinal >= 0 ? where.stream : nullptr;
}

}  // namespace ringlet::tensorflow_ops
