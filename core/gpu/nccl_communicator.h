// One NCCL communicator over a Ringlet communicator's ranks, on one device.
// NCCL runs in its non-blocking mode so that no call can wait past the job's
// deadline: initialization and every collective are watched from the host,
// and a NCCL error, a deadline or a failed peer aborts the communicator
// (ncclCommAbort) before the error is thrown. CUDA and NCCL builds only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "core/communicator.h"

namespace ringlet::core::gpu {

class NcclCommunicator {
 public:
  // Collective over `comm`'s ranks: its rank 0 makes NCCL's unique id and
  // publishes it in the rendezvous store under `key` (the same on every rank,
  // unique in the job); every rank then joins, within comm's deadline. NCCL
  // refuses two ranks on one device, and the error says so.
  NcclCommunicator(Communicator& comm, int device, const std::string& key, int global_rank);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  ncclComm_t get() const { return comm_; }

  // Checks what a NCCL call returned: ncclInProgress is waited out; anything
  // but success aborts and throws, naming `what`.
  void check(ncclResult_t r, const char* what);

  // Waits until `done` (recorded on the stream after the NCCL call) has
  // happened, watching NCCL's asynchronous error and the deadline.
  void wait(cudaEvent_t done, transport::Deadline deadline, const char* what);

 private:
  // Polls ncclCommGetAsyncError until it leaves ncclInProgress.
  void settle(const char* what, transport::Deadline deadline);
  [[noreturn]] void fail(ncclResult_t r, const char* what);
  [[noreturn]] void time_out(const char* what);

  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  int device_;
  int rank_;  // this rank, global, for messages
  int size_;  // ranks of the communicator
  std::string set_text_;
  Communicator& owner_;
};

}  // namespace ringlet::core::gpu
