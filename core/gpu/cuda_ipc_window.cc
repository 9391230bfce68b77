#include "core/gpu/cuda_ipc_window.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/gpu/device_error.h"
#include "ringlet/kernels/cuda.h"
#include "ringlet/kernels/peer_protocol.h"

namespace ringlet::core::gpu {

namespace {

// What a rank publishes: its buffer and its event, and where they live.
struct Exported {
  cudaIpcMemHandle_t memory;
  cudaIpcEventHandle_t event;
  int32_t device;
  uint64_t bytes;
  cudaUUID_t uuid;   // the GPU, the same whatever ordinal a process gives it
  int32_t resident;  // blocks of the waiting kernel the GPU holds at once
  int32_t mps;       // its contexts are shared through MPS
};

// Whether the ranks' kernels run at once, and how many blocks each may launch,
// from what every rank published (the same on every rank).
void agree_on_kernels(const std::vector<Exported>& all, bool& concurrent, int& blocks) {
  std::map<std::string, int> sharing;  // GPU -> ranks on it
  auto key = [](const Exported& e) { return std::string(e.uuid.bytes, sizeof e.uuid.bytes); };
  for (const Exported& e : all) ++sharing[key(e)];
  concurrent = true;
  blocks = ringlet::kernels::peer::kMaxBlocks;
  for (const Exported& e : all) {
    const int n = sharing[key(e)];
    concurrent = concurrent && (n == 1 || e.mps != 0);
    blocks = std::min(blocks, std::max(1, e.resident / n));
  }
}

}  // namespace

CudaIpcWindow::CudaIpcWindow(Communicator& comm, DeviceQueue& q, size_t bytes,
                             const std::string& key)
    : me_(comm.rank()),
      device_(q.device),
      bytes_(bytes),
      buffers_(comm.size(), nullptr),
      events_(comm.size(), nullptr) {
  const int device = q.device;
  const int global_rank = q.rank;
  auto cuda = [&](cudaError_t e, const std::string& what) { q.check(e, what.c_str()); };
  try {
    void* mine = nullptr;
    const size_t allocated = bytes + kernels::peer::kFlagBytes;
    cuda(cudaMalloc(&mine, allocated),
         "cudaMalloc of " + std::to_string(allocated) + " bytes for the CUDA IPC window");
    buffers_[me_] = static_cast<std::byte*>(mine);
    // Zeroed before any peer can reach them (the flags only ever grow): the
    // handle is published once the device has done it.
    cuda(cudaMemsetAsync(flags(me_), 0, kernels::peer::kFlagBytes, q.stream.get()),
         "cudaMemsetAsync of the flag area");
    q.wait_for_queued("zeroing the CUDA IPC window's flag area");
    void* failure = nullptr;
    cuda(cudaHostAlloc(&failure, sizeof(uint64_t), cudaHostAllocMapped),
         "cudaHostAlloc of the waiting kernels' failure word");
    failure_host_ = static_cast<uint64_t*>(failure);
    *failure_host_ = 0;
    void* on_device = nullptr;
    cuda(cudaHostGetDevicePointer(&on_device, failure, 0),
         "cudaHostGetDevicePointer of the failure word");
    failure_device_ = static_cast<uint64_t*>(on_device);
    cuda(cudaEventCreateWithFlags(&events_[me_], cudaEventDisableTiming | cudaEventInterprocess),
         "cudaEventCreateWithFlags (interprocess)");
    Exported out{};
    cuda(cudaIpcGetMemHandle(&out.memory, mine), "cudaIpcGetMemHandle");
    cuda(cudaIpcGetEventHandle(&out.event, events_[me_]), "cudaIpcGetEventHandle");
    out.device = device;
    out.bytes = bytes;
    cudaDeviceProp props{};
    cuda(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
    out.uuid = props.uuid;
    out.resident = kernels::cuda::peer_resident_blocks();
    int mps = 0;
    if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, device) != cudaSuccess) {
      (void)cudaGetLastError();  // a driver that cannot tell: taken as no MPS
      mps = 0;
    }
    out.mps = mps;
    std::vector<Exported> all(comm.size());
    all[me_] = out;
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
        throw device_failure(ErrorKind::kInternal, global_rank,
                             "the CUDA IPC handles of " + peer + " have " +
                                 std::to_string(got.size()) + " bytes, not " +
                                 std::to_string(sizeof in));
      }
      std::memcpy(&in, got.data(), sizeof in);
      all[r] = in;
      if (in.bytes != bytes) {
        throw device_failure(ErrorKind::kInternal, global_rank,
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
    agree_on_kernels(all, concurrent_kernels_, peer_blocks_);
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
  if (failure_host_ != nullptr) (void)cudaFreeHost(failure_host_);
  failure_host_ = nullptr;
  failure_device_ = nullptr;
  if (events_[me_] != nullptr) (void)cudaEventDestroy(events_[me_]);
  if (buffers_[me_] != nullptr) (void)cudaFree(buffers_[me_]);
  events_[me_] = nullptr;
  buffers_[me_] = nullptr;
  if (previous >= 0 && previous != device_) (void)cudaSetDevice(previous);
}

}  // namespace ringlet::core::gpu
