// One NCCL communicator over a Ringlet communicator's ranks, on one device.
// NCCL runs in its non-blocking mode so that no call can wait past the job's
// deadline: initialization and every collective are watched from the host,
// and a NCCL error, a deadline or a failed peer aborts the communicator
// (ncclCommAbort) before the error is thrown. CUDA and NCCL builds only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "core/communicator.h"
#include "ringlet/common/failure.h"

namespace ringlet::core::gpu {

class NcclCommunicator {
 public:
  // Collective over `comm`'s ranks: its rank 0 makes NCCL's unique id and
  // publishes it in the rendezvous store under `key` (the same on every rank,
  // unique in the job); every rank then joins, within comm's deadline. NCCL
  // refuses two ranks on one device, and the error says so.
  NcclCommunicator(Communicator& comm, int device, const std::string& key, int global_rank);
  // Finalizes the communicator (NCCL's flush of this rank's work) within the
  // job's timeout and destroys it; aborts it instead past the timeout, or if
  // it failed before.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Makes one NCCL call, `fn(comm)`, then checks its result as check()
  // does. The call runs under the communicator's lock, so that the finalizer
  // cannot abort the communicator (NCCL frees it then) while the call uses
  // it; once it was aborted, the first failure is thrown instead.
  template <class Fn>
  void call(const char* what, Fn&& fn) {
    ncclResult_t r;
    {
      std::lock_guard lock(mu_);
      throw_if_aborted_locked();
      r = fn(comm_);
    }
    check(r, what);
  }
  // The communicator's lock, held by this thread across a group of calls
  // (ncclGroupStart ... ncclGroupEnd: NCCL's group refers to the
  // communicator until it ends); throws the first failure once aborted.
  std::unique_lock<std::recursive_mutex> hold() {
    std::unique_lock lock(mu_);
    throw_if_aborted_locked();
    return lock;
  }

  // Checks what a NCCL call returned (runtime loop): ncclInProgress is waited
  // out; anything but success aborts and throws, naming `what`. Throws the
  // first failure at once once the communicator was aborted.
  void check(ncclResult_t r, const char* what);

  // One look at a collective whose end `done` marks (an event recorded on the
  // stream after it), from the finalizer's thread: true once it happened;
  // throws, after aborting the communicator, on a CUDA or NCCL error or past
  // `deadline`, and throws the first failure once the communicator was
  // aborted.
  bool poll(cudaEvent_t done, transport::Deadline deadline, const char* what);
  // Aborts the communicator now (once; the first failure is kept): its
  // collectives and every later call fail with `why`. Does not throw.
  void abandon(const common::Failure& why) noexcept;

 private:
  // Polls ncclCommGetAsyncError until it leaves ncclInProgress.
  void settle(const char* what, transport::Deadline deadline);
  // Aborts the communicator once (the first failure is kept) and throws it.
  [[noreturn]] void abort_with(common::Failure failure);
  [[noreturn]] void fail(ncclResult_t r, const char* what);
  [[noreturn]] void time_out(const char* what);
  void throw_if_aborted();
  void throw_if_aborted_locked() {
    if (failure_) throw *failure_;
  }

  ncclComm_t comm_ = nullptr;
  // The loop thread calls NCCL and the finalizer polls it; either may abort.
  // Every NCCL call on comm_ holds it (recursive: a failing call aborts under
  // it).
  std::recursive_mutex mu_;
  std::optional<common::Failure> failure_;  // set once aborted
  int device_;
  int rank_;  // this rank, global, for messages
  int size_;  // ranks of the communicator
  std::string set_text_;
  std::chrono::milliseconds timeout_;  // RINGLET_TIMEOUT_SECONDS
};

}  // namespace ringlet::core::gpu
