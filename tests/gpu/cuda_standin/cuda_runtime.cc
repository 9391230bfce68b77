// The stand-in's CUDA runtime: the calls that libringlet, its kernels and the
// tests make, by the runtime's own declarations (cuda_runtime_api.h), so
// that each has the real one's signature. See standin.h for what they do.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "standin.h"

// The runtime's opaque handles, made concrete here.
struct CUstream_st {
  explicit CUstream_st(int d) : device(d) {}
  int device;
  std::shared_ptr<standin::Gate> gate;  // set: waits behind it
  bool hung() const { return gate && gate->blocked; }
};
struct CUevent_st {
  explicit CUevent_st(int d) : device(d) {}
  int device;
  bool interprocess = false;
  bool opened = false;                  // from cudaIpcOpenEventHandle
  std::shared_ptr<standin::Gate> gate;  // recorded behind it
  bool never() const { return gate && gate->blocked; }
};
struct CUmemPoolHandle_st {
  int device;
};

namespace standin {

namespace {

using standin::record;

thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

enum class Kind { kDevice, kPinned, kIpc };
struct Allocation {
  size_t bytes;
  int device;
  Kind kind;
};
// Every live allocation, by its address (under state_mutex()).
std::map<const void*, Allocation>& allocations() {
  static auto* m = new std::map<const void*, Allocation>;
  return *m;
}

void* allocate(size_t bytes, Kind kind) {
  // 256-byte alignment, as cudaMalloc gives; at least one byte.
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (p == nullptr) return nullptr;
  std::lock_guard lock(state_mutex());
  allocations()[p] = {bytes, current_device(), kind};
  return p;
}

cudaError_t release(void* p, Kind kind, const char* call) {
  if (p == nullptr) return cudaSuccess;
  std::lock_guard lock(state_mutex());
  auto it = allocations().find(p);
  if (it == allocations().end() || it->second.kind != kind) {
    note_error(std::string(call) + " of a pointer it did not allocate");
    return fail(cudaErrorInvalidValue);
  }
  allocations().erase(it);
  std::free(p);
  return cudaSuccess;
}

// The allocation holding `p`: its start, or null.
const void* allocation_of(const void* p, Allocation* found) {
  std::lock_guard lock(state_mutex());
  auto& all = allocations();
  auto it = all.upper_bound(p);
  if (it == all.begin()) return nullptr;
  --it;
  const auto* base = static_cast<const std::byte*>(it->first);
  if (static_cast<const std::byte*>(p) >= base + std::max<size_t>(it->second.bytes, 1)) {
    return nullptr;
  }
  *found = it->second;
  return it->first;
}

bool special(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

// Records a call that runs on `stream`, noting a stream of another device
// than the current one (CUDA refuses most such calls).
void on_stream(const char* name, cudaStream_t stream) {
  record(name, true);
  const int d = stream_device(stream);
  if (d != current_device()) note_stream_mismatch(name, d);
}

bool valid_device(int d) { return d >= 0 && d < device_count(); }

constexpr uint32_t kMemMagic = 0x52534d48;    // "RSMH"
constexpr uint32_t kEventMagic = 0x52534548;  // "RSEH"
struct MemHandle {
  uint32_t magic;
  int32_t pid;
  uint64_t base;
  uint64_t bytes;
  int32_t device;
};
struct EventHandle {
  uint32_t magic;
  int32_t pid;
  int32_t device;
};
static_assert(sizeof(MemHandle) <= sizeof(cudaIpcMemHandle_t));
static_assert(sizeof(EventHandle) <= sizeof(cudaIpcEventHandle_t));

CUresult primary_ctx_get_state(CUdevice device, unsigned int* flags, int* active) {
  record("cuDevicePrimaryCtxGetState", false);
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (flags) *flags = 0;
  if (active) *active = has_context(device) ? 1 : 0;
  return CUDA_SUCCESS;
}

// Blocks for good, as the real call would on work that never ends.
[[noreturn]] void wait_forever(const char* call) {
  note_error(std::string(call) + " waits for work that never ends");
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

struct LaunchConfig {
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
};
thread_local std::vector<LaunchConfig> t_configs;

}  // namespace

std::shared_ptr<Gate> hang_stream(cudaStream_t stream) {
  if (special(stream)) return nullptr;
  if (!stream->hung()) stream->gate = std::make_shared<Gate>();
  return stream->gate;
}

int stream_device(cudaStream_t stream) {
  return special(stream) ? current_device() : stream->device;
}

}  // namespace standin

using namespace standin;

// What the library exports (it builds with hidden visibility).
#pragma GCC visibility push(default)
extern "C" {

// ---- devices (no context)

cudaError_t cudaGetDeviceCount(int* count) {
  record("cudaGetDeviceCount", false);
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  record("cudaGetDevice", false);
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) {
    record("cudaSetDevice", false);
    return fail(cudaErrorInvalidDevice);
  }
  set_current_device(device);
  record("cudaSetDevice", true);  // CUDA 12 and later make the primary context here
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  record("cudaGetDeviceProperties", false);
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "Ringlet stand-in GPU %d", device);
  // One UUID per device, the same in every process: "RSGPU" and the ordinal.
  std::memcpy(prop->uuid.bytes, "RSGPU", 5);
  prop->uuid.bytes[15] = static_cast<char>(device);
  prop->totalGlobalMem = size_t{80} << 30;
  prop->multiProcessorCount = 132;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  prop->major = 9;
  prop->minor = 0;
  prop->pciBusID = device + 1;
  prop->canMapHostMemory = 1;
  prop->unifiedAddressing = 1;
  prop->concurrentKernels = 1;
  prop->memoryPoolsSupported = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  record("cudaDeviceGetAttribute", false);
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = 2048;
      break;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      break;
    case cudaDevAttrMemoryPoolsSupported:
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrCanMapHostMemory:
      *value = 1;
      break;
    case cudaDevAttrMpsEnabled:
      *value = 0;
      break;
    default:
      note_error("cudaDeviceGetAttribute of attribute " + std::to_string(attr) +
                 ", which the stand-in does not know (answered 0)");
      *value = 0;
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  record("cudaDeviceCanAccessPeer", false);
  if (!valid_device(device) || !valid_device(peer)) return fail(cudaErrorInvalidDevice);
  *can = device != peer && env_flag("RINGLET_STANDIN_PEER_ACCESS", true) ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  record("cudaDriverGetVersion", false);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  record("cudaRuntimeGetVersion", false);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int,
                                             unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  record("cudaGetDriverEntryPointByVersion", false);
  const bool found = std::strcmp(symbol, "cuDevicePrimaryCtxGetState") == 0;
  *fn = found ? reinterpret_cast<void*>(&primary_ctx_get_state) : nullptr;
  if (status) *status = found ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

// ---- errors

cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return t_last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorNotReady:
      return "device not ready";
    default:
      return "an error of the Ringlet CUDA stand-in";
  }
}

// ---- memory

cudaError_t cudaMalloc(void** p, size_t bytes) {
  record("cudaMalloc", true);
  *p = allocate(bytes, Kind::kDevice);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* p) {
  record("cudaFree", true);  // cudaFree(nullptr) makes a context, famously
  return release(p, Kind::kDevice, "cudaFree");
}

cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream) {
  on_stream("cudaMallocAsync", stream);
  *p = allocate(bytes, Kind::kDevice);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  on_stream("cudaFreeAsync", stream);
  return release(p, Kind::kDevice, "cudaFreeAsync");
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  record("cudaMemPoolCreate", true);
  if (!valid_device(props->location.id)) return fail(cudaErrorInvalidDevice);
  *pool = new CUmemPoolHandle_st{props->location.id};
  return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  record("cudaMemPoolDestroy", true);
  delete pool;
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) {
  record("cudaMemPoolSetAttribute", true);
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t, cudaMemPoolAttr, void* value) {
  record("cudaMemPoolGetAttribute", true);
  std::memset(value, 0, sizeof(uint64_t));
  return cudaSuccess;
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) {
  record("cudaMemPoolTrimTo", true);
  return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void** p, size_t bytes, cudaMemPool_t pool,
                                    cudaStream_t stream) {
  on_stream("cudaMallocFromPoolAsync", stream);
  *p = allocate(bytes, Kind::kDevice);
  if (*p == nullptr) return fail(cudaErrorMemoryAllocation);
  std::lock_guard lock(state_mutex());
  allocations()[*p].device = pool->device;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  record("cudaMallocHost", true);
  *p = allocate(bytes, Kind::kPinned);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  record("cudaHostAlloc", true);
  *p = allocate(bytes, Kind::kPinned);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void* p) {
  record("cudaFreeHost", true);
  return release(p, Kind::kPinned, "cudaFreeHost");
}

cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int) {
  record("cudaHostGetDevicePointer", true);
  *device = host;  // mapped page-locked memory: one address for both
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  record("cudaMemcpy", true);
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  on_stream("cudaMemcpyAsync", stream);
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  record("cudaMemset", true);
  if (bytes > 0) std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  on_stream("cudaMemsetAsync", stream);
  if (bytes > 0) std::memset(p, value, bytes);
  return cudaSuccess;
}

// ---- streams and events

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  record("cudaStreamCreateWithFlags", true);
  *stream = new CUstream_st(current_device());
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  record("cudaStreamCreate", true);
  *stream = new CUstream_st(current_device());
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  record("cudaStreamDestroy", true);
  if (!special(stream)) delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  on_stream("cudaStreamWaitEvent", stream);
  std::lock_guard lock(state_mutex());
  if (event->never() && !special(stream)) stream->gate = event->gate;  // waits behind it
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  on_stream("cudaStreamQuery", stream);
  std::lock_guard lock(state_mutex());
  return !special(stream) && stream->hung() ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  on_stream("cudaStreamSynchronize", stream);
  bool hung;
  {
    std::lock_guard lock(state_mutex());
    hung = !special(stream) && stream->hung();
  }
  if (hung) wait_forever("cudaStreamSynchronize");
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  record("cudaDeviceSynchronize", true);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  record("cudaEventCreateWithFlags", true);
  *event = new CUevent_st(current_device());
  (*event)->interprocess = (flags & cudaEventInterprocess) != 0;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  record("cudaEventCreate", true);
  *event = new CUevent_st(current_device());
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  record("cudaEventDestroy", true);
  if (event->opened) count_ipc(Ipc::kEventClosed);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  on_stream("cudaEventRecord", stream);
  const int d = stream_device(stream);
  std::lock_guard lock(state_mutex());
  if (event->device != d) {
    note_error("cudaEventRecord of an event of device " + std::to_string(event->device) +
               " on a stream of device " + std::to_string(d));
    return fail(cudaErrorInvalidResourceHandle);
  }
  event->gate = special(stream) ? nullptr : stream->gate;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  record("cudaEventQuery", true);
  std::lock_guard lock(state_mutex());
  return event->never() ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  record("cudaEventSynchronize", true);
  bool never;
  {
    std::lock_guard lock(state_mutex());
    never = event->never();
  }
  if (never) wait_forever("cudaEventSynchronize");
  return cudaSuccess;
}

// ---- CUDA IPC

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* p) {
  record("cudaIpcGetMemHandle", true);
  Allocation a{};
  const void* base = allocation_of(p, &a);
  if (base == nullptr || a.kind != Kind::kDevice) {
    note_error("cudaIpcGetMemHandle of a pointer that is no device allocation");
    return fail(cudaErrorInvalidValue);
  }
  std::memset(handle, 0, sizeof *handle);
  const MemHandle h{kMemMagic, getpid(), reinterpret_cast<uint64_t>(base), a.bytes, a.device};
  std::memcpy(handle, &h, sizeof h);
  count_ipc(Ipc::kMemExported);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void** p, cudaIpcMemHandle_t handle, unsigned int) {
  record("cudaIpcOpenMemHandle", true);
  MemHandle h;
  std::memcpy(&h, &handle, sizeof h);
  if (h.magic != kMemMagic) {
    note_error("cudaIpcOpenMemHandle of a handle the stand-in did not make");
    return fail(cudaErrorInvalidValue);
  }
  if (h.pid == getpid()) return fail(cudaErrorInvalidValue);  // CUDA refuses one's own
  *p = allocate(h.bytes, Kind::kIpc);
  if (*p == nullptr) return fail(cudaErrorMemoryAllocation);
  std::memset(*p, 0, h.bytes);
  count_ipc(Ipc::kMemOpened);
  return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void* p) {
  record("cudaIpcCloseMemHandle", true);
  const cudaError_t e = release(p, Kind::kIpc, "cudaIpcCloseMemHandle");
  if (e == cudaSuccess) count_ipc(Ipc::kMemClosed);
  return e;
}

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  record("cudaIpcGetEventHandle", true);
  if (!event->interprocess) return fail(cudaErrorInvalidResourceHandle);
  std::memset(handle, 0, sizeof *handle);
  const EventHandle h{kEventMagic, getpid(), event->device};
  std::memcpy(handle, &h, sizeof h);
  count_ipc(Ipc::kEventExported);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  record("cudaIpcOpenEventHandle", true);
  EventHandle h;
  std::memcpy(&h, &handle, sizeof h);
  if (h.magic != kEventMagic) {
    note_error("cudaIpcOpenEventHandle of a handle the stand-in did not make");
    return fail(cudaErrorInvalidValue);
  }
  // The peer's event, as this process's device sees it.
  *event = new CUevent_st(current_device());
  (*event)->interprocess = true;
  (*event)->opened = true;
  count_ipc(Ipc::kEventOpened);
  return cudaSuccess;
}

// ---- kernels: registered, launched, recorded; nothing runs

void** __cudaRegisterFatBinary(void*) {
  static void* handle = nullptr;
  return &handle;
}
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*,
                            dim3*, int*) {}
void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
void __cudaRegisterManagedVar(void**, void**, char*, const char*, int, size_t, int, int) {}
char __cudaInitModule(void**) { return 1; }

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, CUstream_st* stream) {
  t_configs.push_back({grid, block, shared, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, void* stream) {
  if (t_configs.empty()) return fail(cudaErrorInvalidConfiguration);
  const LaunchConfig c = t_configs.back();
  t_configs.pop_back();
  *grid = c.grid;
  *block = c.block;
  *shared = c.shared;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* fn) {
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(fn));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t stream) {
  on_stream("kernel launch", stream);
  count_launch();
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t stream) {
  on_stream("kernel launch", stream);
  count_launch();
  return cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t stream) {
  on_stream("kernel launch", stream);
  count_launch();
  return cudaSuccess;
}

}  // extern "C"
#pragma GCC visibility pop
