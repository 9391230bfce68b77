// Per device one memory pool of its own, not the device's default pool:
// that one is shared with every cudaMallocAsync of the process (PyTorch's
// asynchronous allocator, the fusion buffers), and its settings are theirs.
//
// Why a result handed back can never be reused under a reader or a writer:
// - The collective writes the result on its own stream, and its handle
//   completes only once the device passed the end of that work (the
//   finalizer saw the end event); the last owner lets go after that. A
//   failed collective's results are never handed back
//   (core/runtime/runtime_device.cc keeps them to the process's end), since
//   its work may never end.
// - The result goes back on the legacy default stream, so it is free only
//   once every read queued before it there or on any blocking stream is
//   done (PyTorch's default stream is the legacy one). This is PyTorch's
//   own rule for its tensors: memory goes back in the order of the stream
//   that uses it, and a read on another stream must be declared
//   (record_stream) or ended before the tensor goes.
// - The pool reuses memory for the next result only once it has seen the
//   free take effect: its internal dependencies are off, so no allocation
//   makes a collective's stream wait for other streams' work (the
//   training's compute on the default stream above all), and memory whose
//   free has not been reached yet is simply not handed out.
#include "core/gpu/cuda_result_pool.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/gpu/cuda_resources.h"

namespace ringlet::core::gpu {
namespace {

// Freed memory the pool keeps rather than returning it to the driver at the
// next synchronization: a training step gathers about the same results every
// step, so these are taken again at once; past this, memory goes back, so
// that a rare large result does not hold device memory the framework's own
// allocator may need.
constexpr uint64_t kKeptBytes = uint64_t{256} << 20;

// Every result is at least this large, so that no collective sees a null
// buffer.
constexpr size_t kLeastBytes = 256;

struct Pools {
  std::mutex mu;
  std::map<int, cudaMemPool_t> by_device;
};

// Never destroyed, nor are the pools: a result may be handed
// back while the process exits, after every other object is gone.
Pools& pools() {
  static Pools* all = new Pools;
  return *all;
}

cudaMemPool_t make_pool(int rank, int device) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaMemPoolCreate(&pool, &props), rank, device, "cudaMemPoolCreate");
  uint64_t kept = kKeptBytes;
  int off = 0;
  cudaError_t err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &kept);
  if (err == cudaSuccess) {
    err = cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &off);
  }
  if (err != cudaSuccess) (void)cudaMemPoolDestroy(pool);
  check_cuda(err, rank, device, "cudaMemPoolSetAttribute");
  return pool;
}

// The pool of `device` (current), made on first use.
cudaMemPool_t pool_of(int rank, int device) {
  Pools& all = pools();
  std::lock_guard lock(all.mu);
  cudaMemPool_t& pool = all.by_device[device];
  if (pool == nullptr) pool = make_pool(rank, device);
  return pool;
}

// Owns `p` of `device`, handing it back to its pool when the last owner lets
// go (see the top of this file for why that is safe). It may go at exit,
// after CUDA unloaded: an error is of no use then.
std::shared_ptr<void> handed_back_on_release(void* p, int device) {
  return std::shared_ptr<void>(p, [device](void* q) {
    DeviceScope scope(device, std::nothrow);
    (void)cudaFreeAsync(q, cudaStreamLegacy);
  });
}

void* take(int rank, int device, size_t bytes, cudaMemPool_t pool, cudaStream_t stream) {
  void* p = nullptr;
  check_cuda(
      cudaMallocFromPoolAsync(&p, std::max(bytes, kLeastBytes), pool, stream), rank, device,
      ("cudaMallocFromPoolAsync of " + std::to_string(bytes) + " bytes for the result").c_str());
  return p;
}

}  // namespace

std::shared_ptr<void> allocate_result(int rank, int device, size_t bytes, cudaStream_t stream) {
  DeviceScope scope(device, rank);
  return handed_back_on_release(take(rank, device, bytes, pool_of(rank, device), stream), device);
}

}  // namespace ringlet::core::gpu
