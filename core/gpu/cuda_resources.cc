#include "core/gpu/cuda_resources.h"

#include <cuda.h>

#include <map>
#include <mutex>
#include <vector>

#include "core/gpu/device_error.h"

namespace ringlet::core::gpu {

void check_cuda(cudaError_t err, int rank, int device, const char* what) {
  if (err == cudaSuccess) return;
  // A device that is not there is the caller's tensor naming it, not a fault
  // of the collective.
  const bool no_such_device = err == cudaErrorNoDevice || err == cudaErrorInvalidDevice ||
                              err == cudaErrorInsufficientDriver;
  throw device_failure(no_such_device ? ErrorKind::kInvalidArgument : ErrorKind::kInternal, rank,
                       "cuda:" + std::to_string(device) + ": " + what +
                           " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                           ")" + (no_such_device ? "; this process sees no such CUDA device" : ""));
}

void use_device(int device, int rank) {
  // cudaGetDevice answers from the thread's state: it makes no context.
  int now = -1;
  check_cuda(cudaGetDevice(&now), rank, device, "cudaGetDevice");
  if (now != device) check_cuda(cudaSetDevice(device), rank, device, "cudaSetDevice");
}

bool has_primary_context(int device) {
  using GetState = CUresult (*)(CUdevice, unsigned int*, int*);
  static const GetState get_state = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 7000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return GetState{nullptr};
    }
    return reinterpret_cast<GetState>(fn);
  }();
  if (get_state == nullptr) return false;
  unsigned int flags = 0;
  int active = 0;
  return get_state(static_cast<CUdevice>(device), &flags, &active) == CUDA_SUCCESS && active != 0;
}

DeviceScope::DeviceScope(int device, int rank) {
  check_cuda(cudaGetDevice(&previous_), rank, device, "cudaGetDevice");
  if (previous_ == device) {
    previous_ = -1;  // nothing to switch back to
    return;
  }
  check_cuda(cudaSetDevice(device), rank, device, "cudaSetDevice");
  // The caller's device without a context stays as it was: unused.
  if (!has_primary_context(previous_)) previous_ = -1;
}

DeviceScope::DeviceScope(int device, std::nothrow_t) noexcept {
  try {
    DeviceScope scope(device, -1);
    std::swap(previous_, scope.previous_);
  } catch (const std::exception&) {
    (void)cudaGetLastError();
  }
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

void DeviceMemory::reserve(size_t bytes, int rank, int device) {
  if (bytes <= bytes_) return;
  if (data_ != nullptr) check_cuda(cudaFreeAsync(data_, stream_), rank, device, "cudaFreeAsync");
  data_ = nullptr;
  bytes_ = 0;
  check_cuda(cudaMallocAsync(&data_, bytes, stream_), rank, device,
             ("cudaMallocAsync of " + std::to_string(bytes) + " bytes").c_str());
  bytes_ = bytes;
}

DeviceMemory::~DeviceMemory() {
  if (data_ != nullptr) (void)cudaFreeAsync(data_, stream_);
}

void PinnedMemory::reserve(size_t bytes, int rank, int device) {
  if (bytes <= bytes_) return;
  if (data_ != nullptr) (void)cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
  void* p = nullptr;
  check_cuda(cudaMallocHost(&p, bytes), rank, device,
             ("cudaMallocHost of " + std::to_string(bytes) + " bytes").c_str());
  data_ = static_cast<std::byte*>(p);
  bytes_ = bytes;
}

PinnedMemory::~PinnedMemory() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
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

namespace {

struct EventPool {
  std::mutex mu;
  std::map<int, std::vector<std::unique_ptr<Event>>> free;  // by device
};

// Never destroyed: an event may come back while the process exits.
EventPool& event_pool() {
  static EventPool* pool = new EventPool;
  return *pool;
}

}  // namespace

std::shared_ptr<Event> pooled_event(int rank, int device) {
  EventPool& pool = event_pool();
  std::unique_ptr<Event> event;
  {
    std::lock_guard lock(pool.mu);
    std::vector<std::unique_ptr<Event>>& free = pool.free[device];
    if (!free.empty()) {
      event = std::move(free.back());
      free.pop_back();
    }
  }
  if (!event) event = std::make_unique<Event>(rank, device);
  return std::shared_ptr<Event>(event.release(), [device](Event* e) {
    EventPool& pool = event_pool();
    std::lock_guard lock(pool.mu);
    pool.free[device].emplace_back(e);
  });
}

}  // namespace ringlet::core::gpu
