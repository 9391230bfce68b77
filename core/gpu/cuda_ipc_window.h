// The device twin of the shared-memory window: every rank of a communicator
// on this host exports a device buffer and an interprocess event with CUDA
// IPC, and opens every peer's, so that a kernel on one rank reads and writes
// the others' buffers and a stream waits, on the device, for a point in a
// peer's stream. Ranks may share one GPU (CUDA IPC between processes on the
// same device), or sit on GPUs that reach each other (peer access). The
// handles travel through the rendezvous store. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/communicator.h"

namespace ringlet::core::gpu {

class CudaIpcWindow {
 public:
  // Collective over `comm`'s ranks, all on this host: each allocates `bytes`
  // on `device` (current), publishes the handles under `key` + "/" + its
  // rank (the key the same on every rank, unique in the job), and opens
  // every peer's within comm's deadline. Throws RuntimeError naming the rank
  // and the peer whose handle could not be read or opened.
  CudaIpcWindow(Communicator& comm, int device, size_t bytes, const std::string& key,
                int global_rank);
  // Closes the peers' buffers and events, then frees its own: every
  // collective that used them has ended on the device by then.
  ~CudaIpcWindow();
  CudaIpcWindow(const CudaIpcWindow&) = delete;
  CudaIpcWindow& operator=(const CudaIpcWindow&) = delete;

  size_t bytes() const { return bytes_; }
  // Rank r's buffer as this process reaches it (its own, or the mapping).
  std::byte* buffer(int r) const { return buffers_[r]; }
  // Rank r's event (its own, or the opened handle). Each rank records its own
  // after its work and the others wait for it on their streams.
  cudaEvent_t event(int r) const { return events_[r]; }

 private:
  void release();

  int me_;
  int device_;
  size_t bytes_;
  std::vector<std::byte*> buffers_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace ringlet::core::gpu
