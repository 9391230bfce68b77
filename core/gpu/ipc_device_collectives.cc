// The device collectives of HOROVOD_GPU_OPERATIONS=RING: Ringlet's own
// direct algorithm on device memory, between the ranks of one host, over
// CUDA IPC. It is the shared-memory window's direct allreduce with the
// window's halves in device memory (core/gpu/cuda_ipc_window.h) and the
// element work in the CUDA kernels; several ranks may share one GPU.
//
// Each round takes up to a half (kHalfBytes) of the fused message and cuts it
// into one part per rank, each starting on 16 bytes:
//   (a) stage: every rank packs its tensors' share of the round into its own
//       half, with the prescale, and publishes staged;
//   (b) reduce: rank i reads part i of every rank's half (reduce_many, ranks
//       in local order, so every element comes from one reduction in one
//       order and all ranks hold bit-identical results), writes it in place
//       in its own half, scales it by the result's one factor (the
//       postscale, with an average's 1/n), and publishes reduced;
//   (c) unpack: every rank copies each part from its owner's half into the
//       tensors, and publishes consumed.
// A tensor of at least RINGLET_CUDA_IPC_DIRECT_BYTES goes without the window
// when every rank can share it (core/gpu/cuda_ipc_tensors.h): in one round every rank publishes
// where its input and output lie, then rank i reduces part i of every rank's input straight into
// every rank's output (reduce_many_to_all, with the prescale and the
// result's scale). Each input is read once and each output written once, the
// least device memory traffic an allreduce can have, against the window's
// pack, reduce and unpack.
//
// RINGLET_ALGORITHM=ring runs the allreduce as Ringlet's ring over the same
// halves instead (round_plan.h: ring_steps): after the pack, each step
// reduces (or, in the allgather, copies) one part of the predecessor's half
// into this rank's own, so a rank reads only its predecessor's memory, the
// pattern for GPUs linked in a ring rather than all to all; every part is
// reduced once, by a chain in one order, so all ranks hold the same bits.
//
// The host flags are the window's (core/collectives/window_layout.h): a rank
// publishes a flag after recording its interprocess event behind that step's
// work, and a rank that saw the flag makes its stream wait for that event, so
// the host never waits for the device; it only waits for its peers to have
// queued their part. A half is staged again two rounds later, once every peer
// has consumed it and their streams are past their reads; and a collective
// ends on a rank's device only once every peer's stream is past its reads of
// that rank's halves.
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
    CollectiveStart start(queues_, rank_, device, ready, comm.deadline());
    DeviceQueue& q = start.q;
    if (across_hosts(comm)) {
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
    IpcSet& set = ipc_set(comm, process_set, device);
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
    CollectiveStart start(queues_, rank_, device, {&ready, 1}, comm.deadline());
    DeviceQueue& q = start.q;
    if (across_hosts(comm)) {
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
    IpcSet& set = ipc_set(comm, process_set, device);
    set.peers_done = false;
    Rounds rounds(comm, set.window, q);
    const int root_lr = rounds.local_of(root);
    if (root_lr < 0) {
      throw device_failure(ErrorKind::kInternal, rank_,
                           "the broadcast's root, rank " + std::to_string(comm.global_rank(root)) +
                               ", is not on this host's CUDA IPC window");
    }
    const size_t bytes = count * dtype_size(dtype);
    auto* data = static_cast<std::byte*>(buffer);
    // The root stages each round in its half; the others copy it from there.
    uint64_t last = 0;
    for (size_t off = 0; off < bytes; off += kHalfBytes) {
      const size_t m = std::min(kHalfBytes, bytes - off);
      const uint64_t g = last = rounds.begin();
      if (rounds.me() == root_lr) {
        q.check(cudaMemcpyAsync(rounds.half(root_lr, g), data + off, m, cudaMemcpyDeviceToDevice,
                                q.stream.get()),
                "cudaMemcpyAsync into the root's half (CUDA IPC broadcast)");
        rounds.publish(&SegmentControl::staged, g);
      } else {
        rounds.wait(root_lr, &SegmentControl::staged, g);
        q.check(cudaMemcpyAsync(data + off, rounds.half(root_lr, g), m, cudaMemcpyDeviceToDevice,
                                q.stream.get()),
                "cudaMemcpyAsync from the root's half (CUDA IPC broadcast)");
      }
      rounds.end(g);
    }
    if (last > 0) rounds.drain(last);
    watch(q, comm.deadline(), "the broadcast over CUDA IPC", std::move(report));
  }

  std::shared_ptr<void> allocate(int device, size_t bytes) override {
    DeviceScope scope(device, rank_);
    return allocate_result(rank_, device, bytes, queues_[device].stream.get());
  }

  // Each rank stages its block a round at a time in its half; the others
  // copy it from there into place.
  void allgather(Communicator& comm, int32_t process_set, int device, const void* input,
                 std::span<const size_t> counts, void* output, DataType dtype,
                 const std::shared_ptr<Event>& ready, Report report) override {
    CollectiveStart start(queues_, rank_, device, {&ready, 1}, comm.deadline());
    DeviceQueue& q = start.q;
    const size_t es = dtype_size(dtype);
    const std::vector<size_t> at = offsets(counts);
    const int me = comm.rank();
    if (across_hosts(comm)) {
      q.mark("STAGED_ALLGATHER");
      staged(q, q.staging, input, counts[me] * es, output, at.back() * es,
             [&](std::byte* in, std::byte* out) { core::allgather(comm, in, out, counts, dtype); });
      watch(q, comm.deadline(), "the allgather staged through the host", std::move(report));
      return;
    }
    q.mark("CUDA_IPC_ALLGATHER");
    q.copy(byte_at(output, at[me] * es), input, counts[me] * es, "this rank's own block");
    uint64_t last = 0;
    if (comm.size() > 1) {
      IpcSet& set = ipc_set(comm, process_set, device);
      set.peers_done = false;
      Rounds rounds(comm, set.window, q);
      const size_t largest = *std::max_element(counts.begin(), counts.end()) * es;
      for (size_t off = 0; off < largest; off += kHalfBytes) {
        const uint64_t g = last = rounds.begin();
        q.copy(rounds.half(rounds.me(), g), byte_at(input, off),
               chunk(counts[me] * es, off, kHalfBytes), "into this rank's half");
        rounds.publish(&SegmentControl::staged, g);
        for (int lr = 0; lr < rounds.size(); ++lr) {
          const int r = rounds.rank_of(lr);
          const size_t len = chunk(counts[r] * es, off, kHalfBytes);
          if (lr == rounds.me() || len == 0) continue;
          rounds.wait(lr, &SegmentControl::staged, g);
          q.copy(byte_at(output, at[r] * es + off), rounds.half(lr, g), len, "from a peer's half");
        }
        rounds.end(g);
      }
      if (last > 0) rounds.drain(last);
    }
    watch(q, comm.deadline(), "the allgather over CUDA IPC", std::move(report));
  }

  // Each round packs a chunk of every rank's block (slot lr of the half holds
  // local rank lr's), with the prescale; rank r then reduces its slot across
  // every half straight into its output, and finishes it there.
  void reducescatter(Communicator& comm, int32_t process_set, int device, const void* input,
                     std::span<const size_t> counts, void* output, DataType dtype, ReduceOp op,
                     double prescale, double postscale, const std::shared_ptr<Event>& ready,
                     Report report) override {
    CollectiveStart start(queues_, rank_, device, {&ready, 1}, comm.deadline());
    DeviceQueue& q = start.q;
    const size_t es = dtype_size(dtype);
    const std::vector<size_t> at = offsets(counts);
    const int me = comm.rank();
    if (across_hosts(comm)) {
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
    IpcSet& set = ipc_set(comm, process_set, device);
    set.peers_done = false;
    Rounds rounds(comm, set.window, q);
    const int n = rounds.size();
    const size_t slot = kHalfBytes / es / n / padded(1, es) * padded(1, es);  // elements
    const size_t largest = *std::max_element(counts.begin(), counts.end());
    uint64_t last = 0;
    for (size_t off = 0; off < largest; off += slot) {
      const uint64_t g = last = rounds.begin();
      q.segment_table.clear();
      q.pointer_table.clear();
      for (int lr = 0; lr < n; ++lr) {
        const int r = rounds.rank_of(lr);
        if (const size_t len = chunk(counts[r], off, slot)) {
          q.segment_table.push_back(
              {const_cast<std::byte*>(byte_at(input, (at[r] + off) * es)), lr * slot, len});
        }
        q.pointer_table.push_back(rounds.half(lr, g) + rounds.me() * slot * es);
      }
      q.upload_tables();
      q.check(kernels::cuda::pack(dtype, rounds.half(rounds.me(), g), q.segment(0),
                                  static_cast<int>(q.segment_table.size()), n * slot, prescale,
                                  q.stream.get()),
              "the pack kernel (CUDA IPC reducescatter)");
      rounds.publish(&SegmentControl::staged, g);
      rounds.wait_all(&SegmentControl::staged, g);
      if (const size_t len = chunk(counts[me], off, slot)) {
        void* out = byte_at(output, off * es);
        q.check(kernels::cuda::reduce_many(dtype, op, out, q.pointer(0), n, len, q.stream.get()),
                "the reduce kernel (CUDA IPC reducescatter)");
        q.finish(dtype, op, out, len, n, postscale);
      }
      rounds.end(g);
    }
    if (last > 0) rounds.drain(last);
    watch(q, comm.deadline(), "the reducescatter over CUDA IPC", std::move(report));
  }

  // Each round stages a chunk of every block this rank sends (slot lr of the
  // half for local rank lr); every rank copies its slot from each peer's half.
  void alltoall(Communicator& comm, int32_t process_set, int device, const void* input,
                std::span<const size_t> send_counts, void* output,
                std::span<const size_t> recv_counts, size_t largest, DataType dtype,
                const std::shared_ptr<Event>& ready, Report report) override {
    CollectiveStart start(queues_, rank_, device, {&ready, 1}, comm.deadline());
    DeviceQueue& q = start.q;
    const size_t es = dtype_size(dtype);
    const std::vector<size_t> send_at = offsets(send_counts), recv_at = offsets(recv_counts);
    const int me = comm.rank();
    if (across_hosts(comm)) {
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
    uint64_t last = 0;
    if (comm.size() > 1) {
      IpcSet& set = ipc_set(comm, process_set, device);
      set.peers_done = false;
      Rounds rounds(comm, set.window, q);
      const int n = rounds.size();
      const size_t slot = kHalfBytes / n / 16 * 16;  // bytes
      for (size_t off = 0; off < largest * es; off += slot) {
        const uint64_t g = last = rounds.begin();
        for (int lr = 0; lr < n; ++lr) {
          const int r = rounds.rank_of(lr);
          const size_t len = chunk(send_counts[r] * es, off, slot);
          if (lr == rounds.me() || len == 0) continue;
          q.copy(rounds.half(rounds.me(), g) + lr * slot, byte_at(input, send_at[r] * es + off),
                 len, "into this rank's half");
        }
        rounds.publish(&SegmentControl::staged, g);
        for (int lr = 0; lr < n; ++lr) {
          const int r = rounds.rank_of(lr);
          const size_t len = chunk(recv_counts[r] * es, off, slot);
          if (lr == rounds.me() || len == 0) continue;
          rounds.wait(lr, &SegmentControl::staged, g);
          q.copy(byte_at(output, recv_at[r] * es + off), rounds.half(lr, g) + rounds.me() * slot,
                 len, "from a peer's half");
        }
        rounds.end(g);
      }
      if (last > 0) rounds.drain(last);
    }
    watch(q, comm.deadline(), "the alltoall over CUDA IPC", std::move(report));
  }

 private:
  // Allreduces `t` between the ranks' own buffers in one round: rank i
  // reduces part i of every input into every output. Returns false, having
  // queued nothing, when some rank cannot share its tensors; the caller then
  // stages them through the window.
  bool direct_allreduce(Rounds& rounds, PeerTensors& peers, DeviceQueue& q, const DeviceSegment& t,
                        DataType dtype, ReduceOp op, double prescale, double postscale,
                        uint64_t& last) {
    const int n = rounds.size();
    const int me = rounds.me();
    const uint64_t g = last = rounds.begin();
    const SharedTensor input = share(t.input);
    const TensorNotes mine{input, t.output == t.input ? input : share(t.output)};
    std::memcpy(rounds.notes(me, g), &mine, sizeof mine);
    // Staged here means: these notes are written, and (through the event)
    // the input is ready and the output free to write on this device.
    rounds.publish(&SegmentControl::staged, g);
    std::vector<TensorNotes> all(n);
    bool shareable = true;
    for (int lr = 0; lr < n; ++lr) {
      if (lr == me) {
        all[lr] = mine;
      } else {
        rounds.wait(lr, &SegmentControl::staged, g);
        std::memcpy(&all[lr], rounds.notes(lr, g), sizeof(TensorNotes));
      }
      shareable = shareable && all[lr].input.shareable != 0 && all[lr].output.shareable != 0;
    }
    if (!shareable) {  // every rank read the same notes, so all stage it
      rounds.end(g);
      return false;
    }
    const size_t es = dtype_size(dtype);
    const TensorPart part = tensor_part(t.count, es, n, me);
    // The table: this rank's part of every rank's input, then of every
    // rank's output, as this process reaches them.
    q.segment_table.clear();
    q.pointer_table.clear();
    for (const bool output : {false, true}) {
      for (int lr = 0; lr < n; ++lr) {
        const void* base = output ? t.output : t.input;
        if (lr != me) {
          base = peers.open(rounds.global_of(lr), output ? all[lr].output : all[lr].input, q);
        }
        q.pointer_table.push_back(byte_at(base, part.begin * es));
      }
    }
    q.upload_tables();
    // Reduced counts two steps here. 1: this rank opened every peer's
    // allocations. No rank writes into another's tensors before every rank
    // did, so a rank that fails to open one throws with its own tensors
    // untouched by its peers (who fail at the deadline, having written
    // nothing either).
    rounds.publish(&SegmentControl::reduced, g, 1);
    rounds.wait_all(&SegmentControl::reduced, g, 1);
    q.check(kernels::cuda::reduce_many_to_all(dtype, op, q.output_pointer(n), n, q.pointer(0), n,
                                              part.length, n, prescale, postscale, q.stream.get()),
            "the reduce kernel (CUDA IPC direct allreduce)");
    // 2: this rank's part is written in every output. Every part of this
    // rank's output is written once every peer got there.
    rounds.publish(&SegmentControl::reduced, g, 2);
    rounds.wait_all(&SegmentControl::reduced, g, 2);
    rounds.end(g);
    return true;
  }

  // The fused tensors through the window, a round of up to a half at a time.
  void window_allreduce(Rounds& rounds, DeviceQueue& q, std::span<const DeviceSegment> tensors,
                        DataType dtype, ReduceOp op, double prescale, double postscale,
                        uint64_t& last) {
    const int n = rounds.size();
    const int me = rounds.me();
    const size_t es = dtype_size(dtype);
    for (const Round& r : plan_rounds(counts_of(tensors), es, n, kHalfBytes)) {
      const uint64_t g = last = rounds.begin();
      // This round's tables: the pack segments, then the unpack segments of
      // each part, and the inputs of this rank's reduction.
      q.segment_table.clear();
      q.pointer_table.clear();
      const int packed = add_pieces(q, tensors, r.pieces, es, true);
      std::vector<int> first(n + 1, packed);
      for (int p = 0; p < n; ++p)
        first[p + 1] = first[p] + add_pieces(q, tensors, r.part_pieces(p), es, false);
      const size_t my_lo = r.part_begin(me);
      const size_t my_len = r.part_length(me);
      for (int lr = 0; lr < n; ++lr) q.pointer_table.push_back(rounds.half(lr, g) + my_lo * es);
      q.upload_tables();

      std::byte* mine = rounds.half(me, g);
      q.check(
          kernels::cuda::pack(dtype, mine, q.segment(0), packed, r.count, prescale, q.stream.get()),
          "the pack kernel (CUDA IPC allreduce)");
      rounds.publish(&SegmentControl::staged, g);
      rounds.wait_all(&SegmentControl::staged, g);
      q.check(kernels::cuda::reduce_many(dtype, op, mine + my_lo * es, q.pointer(0), n, my_len,
                                         q.stream.get()),
              "the reduce kernel (CUDA IPC allreduce)");
      q.finish(dtype, op, mine + my_lo * es, my_len, n, postscale);
      rounds.publish(&SegmentControl::reduced, g);
      rounds.wait_all(&SegmentControl::reduced, g);
      for (int p = 0; p < n; ++p) {
        q.check(kernels::cuda::unpack(dtype, rounds.half(p, g), q.segment(first[p]),
                                      first[p + 1] - first[p], r.count, 1.0, q.stream.get()),
                "the unpack kernel (CUDA IPC allreduce)");
      }
      rounds.end(g);
    }
  }

  // The fused tensors as a ring over the window, a round of up to a half at
  // a time: pack into this rank's half, run ring_steps() against the
  // predecessor's half (the reduced flag counts the steps), unpack the
  // whole round from this rank's half.
  void ring_allreduce(Rounds& rounds, DeviceQueue& q, std::span<const DeviceSegment> tensors,
                      DataType dtype, ReduceOp op, double prescale, double postscale,
                      uint64_t& last) {
    const int n = rounds.size();
    const int me = rounds.me();
    const int prev = (me + n - 1) % n;
    const size_t es = dtype_size(dtype);
    const std::vector<RingStep> steps = ring_steps(n, me);
    for (const Round& r : plan_rounds(counts_of(tensors), es, n, kHalfBytes)) {
      const uint64_t g = last = rounds.begin();
      std::byte* mine = rounds.half(me, g);
      const std::byte* theirs = rounds.half(prev, g);
      // This round's tables: the pack segments, then the unpack segments.
      q.segment_table.clear();
      q.pointer_table.clear();
      const int packed = add_pieces(q, tensors, r.pieces, es, true);
      add_pieces(q, tensors, r.pieces, es, false);
      q.upload_tables();
      q.check(
          kernels::cuda::pack(dtype, mine, q.segment(0), packed, r.count, prescale, q.stream.get()),
          "the pack kernel (CUDA IPC ring allreduce)");
      rounds.publish(&SegmentControl::staged, g);
      for (size_t t = 0; t < steps.size(); ++t) {
        const RingStep& s = steps[t];
        if (t == 0) {
          rounds.wait(prev, &SegmentControl::staged, g);
        } else {
          rounds.wait(prev, &SegmentControl::reduced, g, t);
        }
        std::byte* part = mine + r.part_begin(s.part) * es;
        const std::byte* from = theirs + r.part_begin(s.part) * es;
        const size_t len = r.part_length(s.part);
        if (s.reduce) {
          q.check(kernels::cuda::reduce(dtype, op, part, from, part, len, q.stream.get()),
                  "the reduce kernel (CUDA IPC ring allreduce)");
          // The last reduction completes this rank's part: the result's
          // one scale (the postscale, with an average's 1/n) happens once,
          // before the allgather hands the part on.
          if (t + 2 == static_cast<size_t>(n)) q.finish(dtype, op, part, len, n, postscale);
        } else {
          q.copy(part, from, len * es, "from the predecessor's half");
        }
        rounds.publish(&SegmentControl::reduced, g, t + 1);
      }
      q.check(kernels::cuda::unpack(dtype, mine, q.segment(packed), packed, r.count, 1.0,
                                    q.stream.get()),
              "the unpack kernel (CUDA IPC ring allreduce)");
      rounds.end(g);
    }
  }

  static std::vector<size_t> counts_of(std::span<const DeviceSegment> tensors) {
    std::vector<size_t> counts;
    for (const DeviceSegment& t : tensors) counts.push_back(t.count);
    return counts;
  }
  // Ranks on several hosts reach each other through host memory; within a
  // host, through the CUDA IPC window.
  static bool across_hosts(Communicator& comm) {
    return comm.size() > 1 && comm.window() == nullptr;
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
          common::LogLevel::kInfo, "device algorithms on cuda:%d (%d ranks, %s): %s", set.device,
          ranks,
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
    IpcSet(Communicator& comm, int device, const std::string& key, int rank)
        : window(comm, device, 2 * kHalfBytes, key, rank), tensors(rank, device), device(device) {
      for (int r : comm.world().ranks_on_host[comm.world().cross_rank]) {
        globals.push_back(comm.global_rank(r));
      }
    }
    CudaIpcWindow window;
    PeerTensors tensors;
    int device;
    std::vector<int> globals;  // by local rank
    // Rounds::begin's peers_done: the window's last device round ended with
    // every peer done with this rank's memory.
    bool peers_done = false;
    bool said = false;  // the algorithms were logged
  };

  IpcSet& ipc_set(Communicator& comm, int32_t process_set, int device) {
    if (comm.window() == nullptr) {
      throw device_failure(ErrorKind::kInternal, rank_,
                           "the CUDA IPC window of process set " + std::to_string(process_set) +
                               " was asked for, but its ranks span hosts");
    }
    const auto key = std::make_pair(process_set, device);
    auto it = sets_.find(key);
    if (it == sets_.end()) {
      // Every member makes the set's windows in the same order (the order of
      // the set's responses), so the set's count names the same one on every
      // member.
      const std::string store_key = "ringlet/cuda-ipc/set" + std::to_string(process_set) + "/" +
                                    std::to_string(created_[process_set]++);
      it = sets_.emplace(key, std::make_unique<IpcSet>(comm, device, store_key, rank_)).first;
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
