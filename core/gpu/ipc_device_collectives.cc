// The device collectives of HOROVOD_GPU_OPERATIONS=RING: Ringlet's own
// algorithms on device memory. Between the ranks of one host they run over
// the CUDA IPC window (core/gpu/cuda_ipc_window.h; several ranks may share
// one GPU): the allreduce's algorithm comes from the device rows of the
// algorithm table (collectives::device_rows) and RINGLET_ALGORITHM, the
// other collectives have one each (core/gpu/ipc_window_algorithms.h,
// core/gpu/ipc_peer_allreduce.h). Between hosts every collective is staged
// through page-locked host memory to the host collectives
// (core/gpu/host_staging.h). This class owns what they share: per device a
// queue, per process set and device a window with the peers' allocations
// this rank opened, and the finalizer that watches what they started.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/collectives/algorithm_table.h"
#include "core/collectives/collectives.h"
#include "core/collectives/window_layout.h"
#include "core/communicator.h"
#include "core/gpu/cuda_ipc_tensors.h"
#include "core/gpu/cuda_ipc_window.h"
#include "core/gpu/cuda_resources.h"
#include "core/gpu/cuda_result_pool.h"
#include "core/gpu/device_collectives.h"
#include "core/gpu/device_error.h"
#include "core/gpu/device_queue.h"
#include "core/gpu/host_staging.h"
#include "core/gpu/ipc_peer_allreduce.h"
#include "core/gpu/ipc_rounds.h"
#include "core/gpu/ipc_window_algorithms.h"
#include "core/gpu/round_plan.h"
#include "ringlet/common/logging.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/kernels/cuda.h"
#include "ringlet/kernels/peer_protocol.h"

namespace ringlet::core::gpu {

using collectives::Algorithm;

namespace {

class IpcDeviceCollectives final : public DeviceCollectives {
  struct IpcSet;

 public:
  IpcDeviceCollectives(int rank, const Config& config)
      : rank_(rank),
        direct_bytes_(config.cuda_ipc_direct_bytes),
        forced_(collectives::forced_algorithm(config.algorithm)),
        rows_(collectives::device_rows(collectives::Tuning{})) {}

  void allreduce(Communicator& comm, int32_t process_set, int device,
                 std::span<const DeviceSegment> tensors,
                 std::span<const std::shared_ptr<Event>> ready, DataType dtype, ReduceOp op,
                 double prescale, double postscale, Report report) override {
    CollectiveStart start(queues_, rank_, device, ready, comm.deadline(), report);
    DeviceQueue& q = start.q;
    if (through_host(comm, process_set, q)) {
      q.mark("STAGED_ALLREDUCE");
      staged_allreduce(comm, q, q.staging, tensors, dtype, op, prescale, postscale);
      watch(q, comm.deadline(), "the allreduce staged through the host", std::move(report));
      return;
    }
    if (comm.size() == 1) {
      // Nothing to exchange: each output is its input, scaled.
      q.mark("CUDA_IPC_ALLREDUCE");
      for (const DeviceSegment& t : tensors) {
        q.scaled_copy(dtype, t.output, t.input, t.count, prescale);
        q.finish(dtype, op, t.output, t.count, 1, postscale);
      }
      watch(q, comm.deadline(), "the allreduce over CUDA IPC", std::move(report));
      return;
    }
    IpcSet& set = ipc_set(comm, process_set, q);
    Rounds rounds(comm, set.window, q);
    const size_t es = dtype_size(dtype);
    size_t bytes = 0;
    for (const DeviceSegment& t : tensors) bytes += t.count * es;
    const Algorithm algorithm = choose(set, rounds.size(), bytes);
    uint64_t last = 0;
    switch (algorithm) {
      case Algorithm::kRing:
        q.mark("CUDA_IPC_RING_ALLREDUCE");
        ring_allreduce(rounds, q, tensors, dtype, op, prescale, postscale, last);
        break;
      case Algorithm::kOneStep:
      case Algorithm::kTwoShot: {
        const bool two_shot = algorithm == Algorithm::kTwoShot;
        q.mark(two_shot ? "CUDA_IPC_TWOSHOT_ALLREDUCE" : "CUDA_IPC_ONESHOT_ALLREDUCE");
        const PeerAllreduce a{.rounds = rounds,
                              .window = set.window,
                              .q = q,
                              .dtype = dtype,
                              .op = op,
                              .prescale = prescale,
                              .postscale = postscale,
                              .deadline = comm.deadline(),
                              .peers_done = set.peers_done};
        set.tensors.next_collective();
        std::vector<DeviceSegment> through_window;
        for (const DeviceSegment& t : tensors) {
          if (!two_shot || direct_bytes_ == 0 || t.count * es < direct_bytes_ ||
              !peer_direct_allreduce(a, set.tensors, t)) {
            through_window.push_back(t);
          }
        }
        if (!through_window.empty()) peer_window_allreduce(a, through_window, two_shot);
        watch(q, comm.deadline(), "the allreduce over CUDA IPC", std::move(report), &set);
        return;
      }
      default: {
        q.mark("CUDA_IPC_ALLREDUCE");
        set.tensors.next_collective();
        std::vector<DeviceSegment> staged;
        for (const DeviceSegment& t : tensors) {
          if (direct_bytes_ == 0 || t.count * es < direct_bytes_ ||
              !direct_allreduce(rounds, set.tensors, q, t, dtype, op, prescale, postscale, last)) {
            staged.push_back(t);
          }
        }
        if (!staged.empty()) {
          window_allreduce(rounds, q, staged, dtype, op, prescale, postscale, last);
        }
      }
    }
    if (last > 0) rounds.drain(last);
    set.peers_done = false;
    watch(q, comm.deadline(), "the allreduce over CUDA IPC", std::move(report), &set);
  }

  void broadcast(Communicator& comm, int32_t process_set, int device, void* buffer, size_t count,
                 DataType dtype, int root, const std::shared_ptr<Event>& ready,
                 Report report) override {
    CollectiveStart start(queues_, rank_, device, {&ready, 1}, comm.deadline(), report);
    DeviceQueue& q = start.q;
    if (through_host(comm, process_set, q)) {
      q.mark("STAGED_BROADCAST");
      staged_broadcast(comm, q, q.staging, buffer, count * dtype_size(dtype), root);
      watch(q, comm.deadline(), "the broadcast staged through the host", std::move(report));
      return;
    }
    q.mark("CUDA_IPC_BROADCAST");
    if (comm.size() == 1) {  // the buffer is the root's already
      watch(q, comm.deadline(), "the broadcast over CUDA IPC", std::move(report));
      return;
    }
    IpcSet& set = ipc_set(comm, process_set, q);
    set.peers_done = false;
    Rounds rounds(comm, set.window, q);
    const int root_lr = rounds.local_of(root);
    if (root_lr < 0) {
      throw device_failure(ErrorKind::kInternal, rank_,
                           "the broadcast's root, rank " + std::to_string(comm.global_rank(root)) +
                               ", is not on this host's CUDA IPC window");
    }
    window_broadcast(rounds, q, buffer, count * dtype_size(dtype), root_lr);
    watch(q, comm.deadline(), "the broadcast over CUDA IPC", std::move(report));
  }

  std::shared_ptr<void> allocate(int device, size_t bytes) override {
    use_device(device, rank_);  // the runtime's thread
    return allocate_result(rank_, device, bytes, queues_[device].stream.get());
  }

  void allgather(Communicator& comm, int32_t process_set, int device, const void* input,
                 std::span<const size_t> counts, void* output, DataType dtype,
                 const std::shared_ptr<Event>& ready, Report report) override {
    CollectiveStart start(queues_, rank_, device, {&ready, 1}, comm.deadline(), report);
    DeviceQueue& q = start.q;
    const size_t es = dtype_size(dtype);
    const std::vector<size_t> at = offsets(counts);
    const int me = comm.rank();
    if (through_host(comm, process_set, q)) {
      q.mark("STAGED_ALLGATHER");
      staged(q, q.staging, input, counts[me] * es, output, at.back() * es,
             [&](std::byte* in, std::byte* out) { core::allgather(comm, in, out, counts, dtype); });
      watch(q, comm.deadline(), "the allgather staged through the host", std::move(report));
      return;
    }
    q.mark("CUDA_IPC_ALLGATHER");
    q.copy(byte_at(output, at[me] * es), input, counts[me] * es, "this rank's own block");
    if (comm.size() > 1) {
      IpcSet& set = ipc_set(comm, process_set, q);
      set.peers_done = false;
      Rounds rounds(comm, set.window, q);
      window_allgather(rounds, q, input, counts, output, es);
    }
    watch(q, comm.deadline(), "the allgather over CUDA IPC", std::move(report));
  }

  void reducescatter(Communicator& comm, int32_t process_set, int device, const void* input,
                     std::span<const size_t> counts, void* output, DataType dtype, ReduceOp op,
                     double prescale, double postscale, const std::shared_ptr<Event>& ready,
                     Report report) override {
    CollectiveStart start(queues_, rank_, device, {&ready, 1}, comm.deadline(), report);
    DeviceQueue& q = start.q;
    const size_t es = dtype_size(dtype);
    const std::vector<size_t> at = offsets(counts);
    const int me = comm.rank();
    if (through_host(comm, process_set, q)) {
      q.mark("STAGED_REDUCESCATTER");
      staged(q, q.staging, input, at.back() * es, output, counts[me] * es,
             [&](std::byte* in, std::byte* out) {
               kernels::cpu::scale(dtype, in, at.back(), prescale);
               core::reducescatter(comm, in, out, counts, dtype, op, postscale);
             });
      watch(q, comm.deadline(), "the reducescatter staged through the host", std::move(report));
      return;
    }
    q.mark("CUDA_IPC_REDUCESCATTER");
    if (comm.size() == 1) {
      q.scaled_copy(dtype, output, input, counts[0], prescale);
      q.finish(dtype, op, output, counts[0], 1, postscale);
      watch(q, comm.deadline(), "the reducescatter over CUDA IPC", std::move(report));
      return;
    }
    IpcSet& set = ipc_set(comm, process_set, q);
    set.peers_done = false;
    Rounds rounds(comm, set.window, q);
    window_reducescatter(rounds, q, input, counts, output, dtype, op, prescale, postscale);
    watch(q, comm.deadline(), "the reducescatter over CUDA IPC", std::move(report));
  }

  void alltoall(Communicator& comm, int32_t process_set, int device, const void* input,
                std::span<const size_t> send_counts, void* output,
                std::span<const size_t> recv_counts, size_t largest, DataType dtype,
                const std::shared_ptr<Event>& ready, Report report) override {
    CollectiveStart start(queues_, rank_, device, {&ready, 1}, comm.deadline(), report);
    DeviceQueue& q = start.q;
    const size_t es = dtype_size(dtype);
    const std::vector<size_t> send_at = offsets(send_counts), recv_at = offsets(recv_counts);
    const int me = comm.rank();
    if (through_host(comm, process_set, q)) {
      q.mark("STAGED_ALLTOALL");
      staged(q, q.staging, input, send_at.back() * es, output, recv_at.back() * es,
             [&](std::byte* in, std::byte* out) {
               core::alltoall(comm, in, send_counts, out, recv_counts, dtype);
             });
      watch(q, comm.deadline(), "the alltoall staged through the host", std::move(report));
      return;
    }
    q.mark("CUDA_IPC_ALLTOALL");
    q.copy(byte_at(output, recv_at[me] * es), byte_at(input, send_at[me] * es),
           send_counts[me] * es, "this rank's own rows");
    if (comm.size() > 1) {
      IpcSet& set = ipc_set(comm, process_set, q);
      set.peers_done = false;
      Rounds rounds(comm, set.window, q);
      window_alltoall(rounds, q, input, send_counts, output, recv_counts, largest, es);
    }
    watch(q, comm.deadline(), "the alltoall over CUDA IPC", std::move(report));
  }

  void abandon(const common::Failure&) override {
    for (auto& [key, set] : sets_) set->window.abandon();
  }

  void release_process_set(int32_t process_set) override {
    finalizer_.drain();
    for (auto it = sets_.begin(); it != sets_.end();) {
      if (it->first.first != process_set) {
        ++it;
        continue;
      }
      // A stream that waits for ever on a dead peer's event still uses the
      // window: it is left to the process's end (see LeaveIfStuck).
      if (queues_.any_stuck()) (void)it->second.release();
      it = sets_.erase(it);
    }
  }

 private:
  // Ranks on several hosts reach each other through host memory; within a
  // host, through the CUDA IPC window, unless some pair of their GPUs has no
  // peer access (the window says so, alike on every rank).
  bool through_host(Communicator& comm, int32_t process_set, DeviceQueue& q) {
    if (comm.size() == 1) return false;
    if (comm.window() == nullptr) return true;
    return !ipc_set(comm, process_set, q).window.reachable();
  }
  // `set`: the window whose waiting kernels may have given up (null: none).
  void watch(DeviceQueue& q, transport::Deadline deadline, const char* what, Report report,
             const IpcSet* set = nullptr) {
    q.watch(
        finalizer_,
        [&q, deadline, what, set, rank = rank_](cudaEvent_t end) {
          if (set != nullptr) throw_if_a_kernel_gave_up(set->window, set->globals, rank);
          return q.passed(end, deadline, what);
        },
        std::move(report.phase), std::move(report.done));
  }

  // The allreduce's algorithm on this window (algorithm_table.h:
  // device_rows()), said once per window at info level.
  Algorithm choose(IpcSet& set, int ranks, size_t bytes) {
    const collectives::PlacementFacts facts{
        .hosts = 1,
        .window = true,
        .concurrent_kernels = set.window.concurrent_kernels() && ranks <= kernels::peer::kMaxRanks};
    const Algorithm a =
        collectives::select(rows_, facts, forced_, collectives::Collective::kAllreduce, bytes);
    if ((a == Algorithm::kOneStep || a == Algorithm::kTwoShot) &&
        ranks > kernels::peer::kMaxRanks) {
      throw device_failure(ErrorKind::kConfig, rank_,
                           "RINGLET_ALGORITHM=" + std::string(collectives::to_string(a)) +
                               " on device memory serves up to " +
                               std::to_string(kernels::peer::kMaxRanks) +
                               " ranks of a host, and this one has " + std::to_string(ranks));
    }
    if (!set.said) {
      set.said = true;
      common::log(
          common::LogLevel::kInfo, "device algorithms on cuda:%d (%d ranks, %s): %s",
          set.window.device(), ranks,
          facts.concurrent_kernels ? "their kernels run at once"
                                   : "their kernels take turns on a shared GPU (no MPS)",
          collectives::describe_choice(rows_, facts, forced_, collectives::Collective::kAllreduce,
                                       collectives::Switch::kUnset)
              .c_str());
    }
    return a;
  }

  // What the ranks of a process set on one device share: the window, and
  // the allocations of the peers' tensors this rank opened.
  struct IpcSet {
    IpcSet(Communicator& comm, DeviceQueue& q, const std::string& key)
        : window(comm, q, 2 * kHalfBytes, key), tensors(q.rank, q.device) {
      for (int r : comm.world().ranks_on_host[comm.world().cross_rank]) {
        globals.push_back(comm.global_rank(r));
      }
    }
    CudaIpcWindow window;
    PeerTensors tensors;
    std::vector<int> globals;  // by local rank
    // Rounds::begin's peers_done: the window's last device round ended with
    // every peer done with this rank's memory.
    bool peers_done = false;
    bool said = false;  // the algorithms were logged
  };

  // The set's window on q's device, made on first use (with q's deadline).
  IpcSet& ipc_set(Communicator& comm, int32_t process_set, DeviceQueue& q) {
    if (comm.window() == nullptr) {
      throw device_failure(ErrorKind::kInternal, rank_,
                           "the CUDA IPC window of process set " + std::to_string(process_set) +
                               " was asked for, but its ranks span hosts");
    }
    const auto key = std::make_pair(process_set, q.device);
    auto it = sets_.find(key);
    if (it == sets_.end()) {
      // Every member makes the set's windows in the same order (the order of
      // the set's responses), so the set's count names the same one on every
      // member.
      const std::string store_key = "ringlet/cuda-ipc/set" + std::to_string(process_set) + "/" +
                                    std::to_string(created_[process_set]++);
      it = sets_.emplace(key, std::make_unique<IpcSet>(comm, q, store_key)).first;
    }
    return *it->second;
  }

  const int rank_;
  std::map<int32_t, int> created_;  // windows made, per process set
  DeviceQueues queues_{rank_};
  const size_t direct_bytes_;              // RINGLET_CUDA_IPC_DIRECT_BYTES (0: never)
  const std::optional<Algorithm> forced_;  // RINGLET_ALGORITHM
  const std::array<collectives::Row, collectives::kDeviceRows> rows_;
  std::map<std::pair<int32_t, int>, std::unique_ptr<IpcSet>> sets_;
  // Destroyed after the finalizer, before the windows and queues: where a
  // collective did not end on the device within its deadline, a stream may
  // wait for ever on a peer's event (nothing cancels cudaStreamWaitEvent),
  // and freeing what it uses would hang the shutdown (cudaFree waits for the
  // whole device). Then the windows, the peers' allocations and the queues
  // are left to the process's end.
  struct LeaveIfStuck {
    IpcDeviceCollectives& self;
    ~LeaveIfStuck() {
      if (!self.queues_.any_stuck()) return;
      for (auto& [key, set] : self.sets_) (void)set.release();
      self.queues_.abandon();
    }
  } leave_if_stuck_{*this};
  // Destroyed first: it waits for every watched collective to end, before
  // the windows and streams they use go.
  Finalizer finalizer_;
};

}  // namespace

std::unique_ptr<DeviceCollectives> make_ipc_device_collectives(int rank, const Config& config) {
  return std::make_unique<IpcDeviceCollectives>(rank, config);
}

}  // namespace ringlet::core::gpu
