#include "core/gpu/cuda_ipc_window.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "core/gpu/device_error.h"
#include "core/gpu/peer_reach.h"
#include "ringlet/common/logging.h"
#include "ringlet/kernels/cuda.h"
#include "ringlet/kernels/peer_protocol.h"

namespace ringlet::core::gpu {

namespace {

// What a rank publishes: its buffer and its event, and where they live.
struct Exported {
  cudaIpcMemHandle_t memory;
  cudaIpcEventHandle_t event;
  uint64_t bytes;
  cudaUUID_t uuid;   // the GPU, the same whatever ordinal a process gives it
  int32_t resident;  // blocks of the waiting kernel the GPU holds at once
  int32_t mps;       // its contexts are shared through MPS
};

GpuUuid uuid_of(const cudaUUID_t& u) {
  GpuUuid out;
  std::memcpy(out.data(), u.bytes, out.size());
  return out;
}

// This rank's GPU and the GPUs it has peer access to, as this process sees them.
GpuReach own_reach(int device, const std::function<void(cudaError_t, const std::string&)>& cuda) {
  GpuReach reach;
  cudaDeviceProp props{};
  cuda(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  reach.uuid = uuid_of(props.uuid);
  int count = 0;
  cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  for (int d = 0; d < count && reach.peer_count < GpuReach::kMaxPeers; ++d) {
    if (d == device) continue;
    int can = 0;
    cuda(cudaDeviceCanAccessPeer(&can, device, d), "cudaDeviceCanAccessPeer");
    if (!can) continue;
    cudaDeviceProp other{};
    cuda(cudaGetDeviceProperties(&other, d), "cudaGetDeviceProperties");
    reach.peers[reach.peer_count++] = uuid_of(other.uuid);
  }
  return reach;
}

// Whether every pair of `comm`'s ranks reaches the other's GPU memory: each
// rank publishes its GpuReach under `key`, and all decide alike. Logs which
// pairs reach each other (info) and, where some do not, which (warning).
bool all_reach(Communicator& comm, const GpuReach& mine, const std::string& key, int rank) {
  const auto* raw = reinterpret_cast<const uint8_t*>(&mine);
  comm.store().set(key + "/" + std::to_string(comm.rank()),
                   std::vector<uint8_t>(raw, raw + sizeof mine));
  std::vector<GpuReach> all(comm.size());
  const transport::Deadline deadline = comm.deadline();
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) {
      all[r] = mine;
      continue;
    }
    const std::vector<uint8_t> got = comm.store().get(key + "/" + std::to_string(r), deadline);
    if (got.size() != sizeof(GpuReach)) {
      throw device_failure(ErrorKind::kInternal, rank,
                           "rank " + std::to_string(comm.global_rank(r)) +
                               " described its GPU in " + std::to_string(got.size()) +
                               " bytes, not " + std::to_string(sizeof(GpuReach)));
    }
    std::memcpy(&all[r], got.data(), sizeof(GpuReach));
  }
  const std::vector<std::pair<int, int>> apart = unreachable_pairs(all);
  std::string gpus;
  for (int r = 0; r < comm.size(); ++r) {
    gpus += (r ? ", rank " : "rank ") + std::to_string(comm.global_rank(r)) + " on " +
            uuid_text(all[r].uuid);
  }
  if (apart.empty()) {
    common::log(common::LogLevel::kInfo,
                "CUDA IPC: every pair of ranks reaches the other's GPU memory (%s)", gpus.c_str());
    return true;
  }
  std::string pairs;
  for (const auto& [a, b] : apart) {
    pairs += (pairs.empty() ? "" : ", ") + std::to_string(comm.global_rank(a)) + "-" +
             std::to_string(comm.global_rank(b));
  }
  common::log(common::LogLevel::kWarning,
              "CUDA IPC: ranks %s have no peer access between their GPUs (%s): their device "
              "collectives stage through host memory",
              pairs.c_str(), gpus.c_str());
  return false;
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
  const GpuReach reach = own_reach(device, cuda);
  if (comm.size() > 1 && !all_reach(comm, reach, key + "/reach", global_rank)) {
    reachable_ = false;
    return;
  }
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
    out.bytes = bytes;
    std::memcpy(out.uuid.bytes, reach.uuid.data(), sizeof out.uuid.bytes);
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
           "cudaIpcOpenMemHandle of the buffer of " + peer + " (on its GPU " +
               uuid_text(uuid_of(in.uuid)) + ")");
      buffers_[r] = static_cast<std::byte*>(theirs);
      cuda(cudaIpcOpenEventHandle(&events_[r], in.event),
           "cudaIpcOpenEventHandle of the event of " + peer);
    }
    std::vector<GpuShare> shares;
    for (const Exported& e : all) {
      shares.push_back({.uuid = uuid_of(e.uuid), .resident = e.resident, .mps = e.mps != 0});
    }
    const WaitingKernels plan = plan_waiting_kernels(shares, kernels::peer::kMaxBlocks);
    concurrent_kernels_ = plan.concurrent;
    peer_blocks_ = plan.blocks;
  } catch (...) {
    release();
    throw;
  }
}

CudaIpcWindow::~CudaIpcWindow() { release(); }

void CudaIpcWindow::abandon() {
  if (failure_host_ == nullptr) return;
  uint64_t none = 0;
  // The device may write its own code at the same time: the first one stays.
  (void)__atomic_compare_exchange_n(failure_host_, &none, kernels::peer::kHostAbort, false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

void CudaIpcWindow::release() {
  // On the window's device (no exception may leave).
  DeviceScope scope(device_, std::nothrow);
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
}

}  // namespace ringlet::core::gpu
