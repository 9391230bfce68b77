#include "core/gpu/cuda_ipc_tensors.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <string>

#include "core/gpu/cuda_resources.h"

namespace ringlet::core::gpu {

namespace {

// The driver's cuPointerGetAttributes, which alone tells an allocation's
// start and unique id. Found through the runtime, so that libringlet does
// not link libcuda, which machines without a driver lack; null where the
// driver does not offer it.
PFN_cuPointerGetAttributes_v7000 pointer_attributes() {
  static const auto fn = [] {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status{};
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &found,
                                                             12000, cudaEnableDefault, &status);
    return err == cudaSuccess && status == cudaDriverEntryPointSuccess
               ? reinterpret_cast<PFN_cuPointerGetAttributes_v7000>(found)
               : nullptr;
  }();
  return fn;
}

}  // namespace

SharedTensor share(const void* data) noexcept {
  SharedTensor t{};
  const auto fn = pointer_attributes();
  if (fn == nullptr) return t;
  CUdeviceptr start = 0;
  unsigned long long id = 0;
  int legacy_ipc = 0;
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                 CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
  void* values[] = {&start, &id, &legacy_ipc};
  if (fn(3, which, values, reinterpret_cast<CUdeviceptr>(data)) != CUDA_SUCCESS ||
      legacy_ipc == 0) {
    return t;
  }
  if (cudaIpcGetMemHandle(&t.handle, reinterpret_cast<void*>(start)) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; clear it for the next call's check
    return t;
  }
  t.allocation = id;
  t.offset = reinterpret_cast<CUdeviceptr>(data) - start;
  t.shareable = 1;
  return t;
}

std::byte* PeerTensors::open(int peer, const SharedTensor& t, DeviceQueue& q) {
  const auto key = std::make_pair(peer, t.allocation);
  auto it = opened_.find(key);
  if (it == opened_.end()) {
    if (opened_.size() >= kOpenAllocations) close_least_recent(q);
    void* base = nullptr;
    check_cuda(cudaIpcOpenMemHandle(&base, t.handle, cudaIpcMemLazyEnablePeerAccess), rank_,
               device_,
               ("cudaIpcOpenMemHandle of a device tensor of rank " + std::to_string(peer)).c_str());
    it = opened_.emplace(key, Opened{static_cast<std::byte*>(base), 0}).first;
  }
  it->second.used = collective_;
  return it->second.base + t.offset;
}

void PeerTensors::close_least_recent(DeviceQueue& q) {
  auto oldest = std::min_element(opened_.begin(), opened_.end(), [](const auto& a, const auto& b) {
    return a.second.used < b.second.used;
  });
  if (oldest == opened_.end() || oldest->second.used == collective_) return;
  // Earlier collectives may still read or write through it on the device.
  q.wait_for_queued("the collectives using a peer's tensor that is about to be closed");
  (void)cudaIpcCloseMemHandle(oldest->second.base);
  opened_.erase(oldest);
}

PeerTensors::~PeerTensors() {
  DeviceScope scope(device_, std::nothrow);
  for (auto& [key, opened] : opened_) (void)cudaIpcCloseMemHandle(opened.base);
}

}  // namespace ringlet::core::gpu
