// The device twin of the shared-memory window: every rank of a communicator
// on this host exports a device buffer and an interprocess event with CUDA
// IPC, and opens every peer's, so that a kernel on one rank reads and writes
// the others' buffers and a stream waits, on the device, for a point in a
// peer's stream. Ranks may share one GPU (CUDA IPC between processes on the
// same device), or sit on GPUs that reach each other (peer access). The
// handles travel through the rendezvous store, with what each rank's device
// is, so that every rank knows alike how many blocks the kernels that wait
// on each other may launch and whether they run at once. First the ranks
// tell each other their GPUs and which GPUs each reaches (peer access): where
// some pair cannot reach the other's memory the window is left empty
// (reachable() false) and the collectives stage through host memory. Past the buffer,
// each rank's allocation holds its flag area for those kernels
// (ringlet/kernels/peer_protocol.h), zeroed before it is published. CUDA
// builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/gpu/device_queue.h"

namespace ringlet::core::gpu {

class CudaIpcWindow {
 public:
  // Collective over `comm`'s ranks, all on this host: each allocates `bytes`
  // on q's device (current), zeroes its flag area on q's stream and waits
  // for that within q's deadline, publishes the handles under `key` + "/" +
  // its rank (the key the same on every rank, unique in the job), and opens
  // every peer's within comm's deadline. Throws a Failure naming the rank
  // and the peer whose handle could not be read or opened.
  CudaIpcWindow(Communicator& comm, DeviceQueue& q, size_t bytes, const std::string& key);
  // Closes the peers' buffers and events, then frees its own: every
  // collective that used them has ended on the device by then.
  ~CudaIpcWindow();
  CudaIpcWindow(const CudaIpcWindow&) = delete;
  CudaIpcWindow& operator=(const CudaIpcWindow&) = delete;

  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  // Whether every pair of ranks reaches the other's device memory (the same
  // on every rank); false: nothing was allocated or opened.
  bool reachable() const { return reachable_; }
  // Rank r's buffer as this process reaches it (its own, or the mapping).
  std::byte* buffer(int r) const { return buffers_[r]; }
  // Rank r's event (its own, or the opened handle). Each rank records its own
  // after its work and the others wait for it on their streams.
  cudaEvent_t event(int r) const { return events_[r]; }
  // Rank r's flag area (kernels::peer::kFlagBytes) as this process reaches it.
  uint64_t* flags(int r) const { return reinterpret_cast<uint64_t*>(buffers_[r] + bytes_); }

  // The same on every rank: whether the ranks' kernels run at once (each
  // GPU holds one of them, or every GPU that holds several shares them
  // through MPS), and the blocks one rank's waiting kernel may launch so
  // that every rank's are resident together (the fewest multiprocessors of
  // any rank's GPU over the ranks sharing it; at least 1).
  bool concurrent_kernels() const { return concurrent_kernels_; }
  int peer_blocks() const { return peer_blocks_; }

  // Where a waiting kernel that gave up says so (kernels::peer::failure_code):
  // page-locked host memory the device writes; 0 while none did. It stays
  // set: every later collective on the window fails at once.
  uint64_t failure() const {
    return failure_host_ == nullptr ? 0 : *static_cast<volatile uint64_t*>(failure_host_);
  }
  // The runtime stopped: every kernel waiting on the window leaves at its
  // next look (kernels::peer::kHostAbort), unless one gave up first.
  void abandon();
  uint64_t* failure_for_device() const { return failure_device_; }

 private:
  void release();

  int me_;
  int device_;
  size_t bytes_;
  std::vector<std::byte*> buffers_;
  std::vector<cudaEvent_t> events_;
  bool reachable_ = true;
  bool concurrent_kernels_ = false;
  int peer_blocks_ = 1;
  uint64_t* failure_host_ = nullptr;
  uint64_t* failure_device_ = nullptr;
};

}  // namespace ringlet::core::gpu
