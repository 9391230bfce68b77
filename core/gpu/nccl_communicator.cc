#include "core/gpu/nccl_communicator.h"

#include <cstring>
#include <vector>

#include "core/gpu/backoff.h"
#include "core/gpu/cuda_resources.h"
#include "core/gpu/device_error.h"

namespace ringlet::core::gpu {

namespace {

// What a NCCL failure means to the job: a remote or system error is a lost
// peer in practice (its process or its link went away).
ErrorKind kind_of(ncclResult_t r) {
  switch (r) {
    case ncclRemoteError:
    case ncclSystemError:
      return ErrorKind::kPeerLost;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return ErrorKind::kInvalidArgument;
    default:
      return ErrorKind::kInternal;
  }
}

}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& comm, int device, const std::string& key,
                                   int global_rank)
    : device_(device), rank_(global_rank), size_(comm.size()), timeout_(comm.config().timeout) {
  set_text_ = "NCCL communicator of " + std::to_string(size_) + " rank" + (size_ == 1 ? "" : "s") +
              " on cuda:" + std::to_string(device);
  ncclUniqueId id;
  const transport::Deadline deadline = comm.deadline();
  if (comm.rank() == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      throw device_failure(kind_of(r), rank_,
                           set_text_ + ": ncclGetUniqueId failed: " + ncclGetErrorString(r));
    }
    // Alone, nobody else needs the id (and a process started without a
    // launcher has no store to put it in).
    if (size_ > 1) {
      comm.store().set(key, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id),
                                                 reinterpret_cast<uint8_t*>(&id) + sizeof id));
    }
  } else {
    const std::vector<uint8_t> bytes = comm.store().get(key, deadline);
    if (bytes.size() != sizeof id) {
      throw device_failure(ErrorKind::kInternal, rank_,
                           set_text_ + ": the unique id in the store has " +
                               std::to_string(bytes.size()) + " bytes, not " +
                               std::to_string(sizeof id));
    }
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, comm.rank(), &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string why = set_text_ + ": ncclCommInitRankConfig failed: " + ncclGetErrorString(r);
    const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    if (last != nullptr && *last != '\0') why += std::string(" (") + last + ")";
    if (r == ncclInvalidUsage) {
      why +=
          "; NCCL runs one rank per device: give each rank its own GPU, or use "
          "HOROVOD_GPU_OPERATIONS=RING";
    }
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
    throw device_failure(kind_of(r), rank_, why);
  }
  settle("ncclCommInitRankConfig (every rank joins)", deadline);
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  {
    std::lock_guard lock(mu_);
    if (failure_) return;  // aborted: NCCL freed it
  }
  // Every collective ended before this (the finalizer drained), so the
  // flush is quick; a peer gone in the meantime makes it wait, and the
  // timeout then aborts.
  const transport::Deadline deadline = transport::Clock::now() + timeout_;
  const ncclResult_t r = ncclCommFinalize(comm_);
  if (r == ncclSuccess || r == ncclInProgress) {
    for (int turns = 0; transport::Clock::now() < deadline; backoff(turns)) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
      if (state == ncclSuccess) {
        (void)ncclCommDestroy(comm_);
        return;
      }
      if (state != ncclInProgress) break;
    }
  }
  (void)ncclCommAbort(comm_);
}

void NcclCommunicator::check(ncclResult_t r, const char* what) {
  throw_if_aborted();
  if (r == ncclSuccess) return;
  if (r == ncclInProgress) {
    settle(what, transport::Clock::now() + timeout_);
    return;
  }
  fail(r, what);
}

void NcclCommunicator::settle(const char* what, transport::Deadline deadline) {
  int turns = 0;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t q = ncclSuccess;
    {
      std::lock_guard lock(mu_);
      throw_if_aborted_locked();
      q = ncclCommGetAsyncError(comm_, &state);
    }
    if (q != ncclSuccess) fail(q, what);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail(state, what);
    if (transport::Clock::now() >= deadline) time_out(what);
    backoff(turns);
  }
}

bool NcclCommunicator::poll(cudaEvent_t done, transport::Deadline deadline, const char* what) {
  throw_if_aborted();
  const cudaError_t e = cudaEventQuery(done);
  if (e == cudaSuccess) return true;
  if (e != cudaErrorNotReady) {
    abort_with(device_failure(ErrorKind::kInternal, rank_,
                              set_text_ + ": " + what + ": cudaEventQuery failed: " +
                                  cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"));
  }
  ncclResult_t state = ncclSuccess;
  {
    std::lock_guard lock(mu_);
    throw_if_aborted_locked();
    (void)ncclCommGetAsyncError(comm_, &state);
  }
  if (state != ncclSuccess && state != ncclInProgress) fail(state, what);
  if (transport::Clock::now() >= deadline) time_out(what);
  return false;
}

void NcclCommunicator::throw_if_aborted() {
  std::lock_guard lock(mu_);
  throw_if_aborted_locked();
}

void NcclCommunicator::abort_with(common::Failure failure) {
  {
    std::lock_guard lock(mu_);
    if (!failure_) {
      failure_ = failure;
      (void)ncclCommAbort(comm_);
    }
    failure = *failure_;
  }
  throw failure;
}

void NcclCommunicator::abandon(const common::Failure& why) noexcept {
  std::lock_guard lock(mu_);
  if (failure_) return;
  failure_ = why;
  (void)ncclCommAbort(comm_);
}

void NcclCommunicator::fail(ncclResult_t r, const char* what) {
  std::string why = set_text_ + ": " + what + " failed: " + ncclGetErrorString(r);
  {
    std::lock_guard lock(mu_);
    throw_if_aborted_locked();  // the first failure wins; NCCL freed the communicator
    const char* last = ncclGetLastError(comm_);
    if (last != nullptr && *last != '\0') why += std::string(" (") + last + ")";
  }
  abort_with(device_failure(kind_of(r), rank_, why));
}

void NcclCommunicator::time_out(const char* what) {
  abort_with(device_failure(ErrorKind::kTimeout, rank_,
                            set_text_ + ": " + what +
                                " did not finish within RINGLET_TIMEOUT_SECONDS; the communicator "
                                "was aborted (a peer may have died or never joined)"));
}

}  // namespace ringlet::core::gpu
