// The callers' own device tensors shared between the ranks of one host with
// CUDA IPC, so that a kernel on one rank reads its peers' inputs and writes
// their outputs with no staging copy. A rank describes each tensor (share)
// and publishes the description; its peers open the allocation the tensor
// lies in and keep it open, keyed by the allocation's process-wide unique
// id, so that a framework's caching allocator, which hands out the same
// allocations step after step, costs one open per allocation and peer.
// CUDA builds only.
//
// CUDA leaves undefined what happens when an allocation is freed while a
// peer still has it open; an opened allocation is therefore only ever read
// or written within a collective whose tensors lie in it (their owners keep
// them alive until it completes), and at most kOpenAllocations stay open,
// the least recently used closed first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

#include "core/gpu/device_queue.h"

namespace ringlet::core::gpu {

// A tensor as peers of its host reach it. Plain data: it travels through
// the host's shared-memory window.
struct SharedTensor {
  cudaIpcMemHandle_t handle;  // of the allocation the tensor lies in
  uint64_t allocation;        // its process-wide unique id (CUDA's buffer id)
  uint64_t offset;            // bytes from the allocation's start to the tensor
  // 0 where legacy CUDA IPC cannot share the allocation (virtual-memory
  // allocations, such as a caching allocator's expandable segments): the
  // tensor is then staged through the window instead.
  uint32_t shareable;
  uint32_t unused;
};

// Where a rank's input and output of an allreduce between the ranks' own
// buffers lie: what it tells its peers in the host's window.
struct TensorNotes {
  SharedTensor input;
  SharedTensor output;
};
static_assert(sizeof(TensorNotes) <= 4096, "the notes fit in the smallest window half");

// Describes `data`, device memory of the current device; shareable = 0
// where it cannot be shared, or where the driver cannot tell (the tensor is
// staged then, which is slower but right).
SharedTensor share(const void* data) noexcept;

// The peers' allocations opened by this rank, for one set of ranks on one
// device.
class PeerTensors {
 public:
  static constexpr size_t kOpenAllocations = 64;

  PeerTensors(int rank, int device) : rank_(rank), device_(device) {}
  // Closes every allocation: every collective that used them has ended on
  // the device by then.
  ~PeerTensors();
  PeerTensors(const PeerTensors&) = delete;
  PeerTensors& operator=(const PeerTensors&) = delete;

  // A collective begins: what it opens is not closed before the next one.
  void next_collective() { ++collective_; }
  // Where tensor `t` of peer `peer` (a global rank, for errors and the key)
  // lies in this process. Opens its allocation on first use; closing the
  // least recently used one to stay within kOpenAllocations first waits, on
  // the host within q's deadline, for the work queued on q so far.
  std::byte* open(int peer, const SharedTensor& t, DeviceQueue& q);

 private:
  struct Opened {
    std::byte* base;
    uint64_t used;  // the collective that last used it
  };
  void close_least_recent(DeviceQueue& q);

  int rank_;
  int device_;
  uint64_t collective_ = 0;
  std::map<std::pair<int, uint64_t>, Opened> opened_;  // (peer, allocation id)
};

}  // namespace ringlet::core::gpu
