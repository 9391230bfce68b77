#include "core/gpu/cuda_ipc_window.h"

#include <cstring>

#include "core/gpu/cuda_resources.h"
#include "core/runtime/runtime_error.h"

namespace ringlet::core::gpu {

using runtime::ErrorKind;
using runtime::RuntimeError;

namespace {

// What a rank publishes: its buffer and its event, and where they live.
struct Exported {
  cudaIpcMemHandle_t memory;
  cudaIpcEventHandle_t event;
  int32_t device;
  uint64_t bytes;
};

}  // namespace

CudaIpcWindow::CudaIpcWindow(Communicator& comm, int device, size_t bytes, const std::string& key,
                             int global_rank)
    : me_(comm.rank()),
      device_(device),
      bytes_(bytes),
      buffers_(comm.size(), nullptr),
      events_(comm.size(), nullptr) {
  auto cuda = [&](cudaError_t e, const std::string& what) {
    check_cuda(e, global_rank, device, what.c_str());
  };
  try {
    void* mine = nullptr;
    cuda(cudaMalloc(&mine, bytes),
         "cudaMalloc of " + std::to_string(bytes) + " bytes for the CUDA IPC window");
    buffers_[me_] = static_cast<std::byte*>(mine);
    cuda(cudaEventCreateWithFlags(&events_[me_], cudaEventDisableTiming | cudaEventInterprocess),
         "cudaEventCreateWithFlags (interprocess)");
    Exported out{};
    cuda(cudaIpcGetMemHandle(&out.memory, mine), "cudaIpcGetMemHandle");
    cuda(cudaIpcGetEventHandle(&out.event, events_[me_]), "cudaIpcGetEventHandle");
    out.device = device;
    out.bytes = bytes;
    const auto* raw = reinterpret_cast<const uint8_t*>(&out);
    // Alone, there is nobody to hand the handles to (nor, without a launcher, a store).
    if (comm.size() > 1) {
      comm.store().set(key + "/" + std::to_string(me_),
                       std::vector<uint8_t>(raw, raw + sizeof out));
    }

    const transport::Deadline deadline = comm.deadline();
    for (int r = 0; r < comm.size(); ++r) {
      if (r == me_) continue;
      const std::string peer = "rank " + std::to_string(comm.global_rank(r));
      const std::vector<uint8_t> got = comm.store().get(key + "/" + std::to_string(r), deadline);
      Exported in{};
      if (got.size() != sizeof in) {
        throw RuntimeError(ErrorKind::kInternal, global_rank,
                           "the CUDA IPC handles of " + peer + " have " +
                               std::to_string(got.size()) + " bytes, not " +
                               std::to_string(sizeof in));
      }
      std::memcpy(&in, got.data(), sizeof in);
      if (in.bytes != bytes) {
        throw RuntimeError(ErrorKind::kInternal, global_rank,
                           "the CUDA IPC window of " + peer + " has " + std::to_string(in.bytes) +
                               " bytes, this rank's " + std::to_string(bytes));
      }
      void* theirs = nullptr;
      cuda(cudaIpcOpenMemHandle(&theirs, in.memory, cudaIpcMemLazyEnablePeerAccess),
           "cudaIpcOpenMemHandle of the buffer of " + peer +
               " (on cuda:" + std::to_string(in.device) +
               "; ranks on different GPUs need peer access between them)");
      buffers_[r] = static_cast<std::byte*>(theirs);
      cuda(cudaIpcOpenEventHandle(&events_[r], in.event),
           "cudaIpcOpenEventHandle of the event of " + peer);
    }
  } catch (...) {
    release();
    throw;
  }
}

CudaIpcWindow::~CudaIpcWindow() { release(); }

void CudaIpcWindow::release() {
  // On the window's device, whatever is current (no exception may leave).
  int previous = -1;
  (void)cudaGetDevice(&previous);
  if (previous != device_) (void)cudaSetDevice(device_);
  for (size_t r = 0; r < buffers_.size(); ++r) {
    if (static_cast<int>(r) == me_) continue;
    if (buffers_[r] != nullptr) (void)cudaIpcCloseMemHandle(buffers_[r]);
    if (events_[r] != nullptr) (void)cudaEventDestroy(events_[r]);
    buffers_[r] = nullptr;
    events_[r] = nullptr;
  }
  if (events_[me_] != nullptr) (void)cudaEventDestroy(events_[me_]);
  if (buffers_[me_] != nullptr) (void)cudaFree(buffers_[me_]);
  events_[me_] = nullptr;
  buffers_[me_] = nullptr;
  if (previous >= 0 && previous != device_) (void)cudaSetDevice(previous);
}

}  // namespace ringlet::core::gpu
