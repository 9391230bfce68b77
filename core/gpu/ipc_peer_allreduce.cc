#include "core/gpu/ipc_peer_allreduce.h"

#include <chrono>
#include <cstring>
#include <string>

#include "core/gpu/device_error.h"
#include "core/gpu/round_plan.h"
#include "ringlet/common/failure.h"
#include "ringlet/kernels/cuda.h"
#include "ringlet/kernels/peer_protocol.h"

namespace ringlet::core::gpu {

namespace peer = kernels::peer;

namespace {

// What a kernel queued now may wait: the time left before the deadline (at
// least a millisecond, so that a kernel that starts late still looks once).
uint64_t nanoseconds_left(transport::Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - transport::Clock::now())
          .count();
  return left < 1000000 ? 1000000 : static_cast<uint64_t>(left);
}

// One round's kernel over the inputs and outputs of `buffers` (by local
// rank); their flag areas are the window's.
void launch(const PeerAllreduce& a, kernels::cuda::PeerBuffers& buffers, uint64_t g, size_t count,
            bool two_shot, double prescale) {
  const int n = a.rounds.size();
  for (int lr = 0; lr < n; ++lr) buffers.flags[lr] = a.window.flags(a.rounds.rank_of(lr));
  const size_t es = dtype_size(a.dtype);
  const peer::Round round{
      .round = g,
      .ranks = n,
      .me = a.rounds.me(),
      .blocks = peer::kernel_blocks(count, es, n, two_shot, a.window.peer_blocks()),
      .count = count,
      .element_bytes = es,
      .two_shot = two_shot,
  };
  a.q.check(kernels::cuda::peer_allreduce(a.dtype, a.op, buffers, round, n, prescale, a.postscale,
                                          nanoseconds_left(a.deadline),
                                          a.window.failure_for_device(), a.q.stream.get()),
            two_shot ? "the two-shot allreduce kernel" : "the one-shot allreduce kernel");
}

}  // namespace

void peer_window_allreduce(const PeerAllreduce& a, std::span<const DeviceSegment> tensors,
                           bool two_shot) {
  const int n = a.rounds.size();
  const int me = a.rounds.me();
  const size_t es = dtype_size(a.dtype);
  DeviceQueue& q = a.q;
  // One-shot keeps its result in the second half of this rank's half, beside
  // the inputs its peers read; two-shot writes the result over the inputs,
  // each part where only its folder reads it.
  const size_t room = two_shot ? kHalfBytes : kHalfBytes / 2;
  const bool lone = tensors.size() == 1;
  for (const Round& r : plan_rounds(counts_of(tensors), es, n, room)) {
    const uint64_t g = a.rounds.begin(a.peers_done);
    q.segment_table.clear();
    q.pointer_table.clear();
    const int packed = add_pieces(q, tensors, r.pieces, es, true);
    add_pieces(q, tensors, r.pieces, es, false);
    q.upload_tables();
    std::byte* mine = a.rounds.half(me, g);
    q.check(kernels::cuda::pack(a.dtype, mine, q.segment(0), packed, r.count, a.prescale,
                                q.stream.get()),
            "the pack kernel (peer allreduce)");
    kernels::cuda::PeerBuffers buffers{};
    for (int lr = 0; lr < n; ++lr) {
      buffers.inputs[lr] = a.rounds.half(lr, g);
      if (two_shot) buffers.outputs[lr] = a.rounds.half(lr, g);
    }
    // A lone tensor's one-shot result goes straight to its output: the
    // round's piece of it, without the padding that ends its slot.
    const bool straight = !two_shot && lone && !r.pieces.empty();
    if (!two_shot) {
      buffers.outputs[me] = straight ? byte_at(tensors[0].output, r.pieces[0].tensor_offset * es)
                                     : mine + kHalfBytes / 2;
    }
    launch(a, buffers, g, straight ? r.pieces[0].count : r.count, two_shot, 1.0);
    if (!straight) {
      q.check(kernels::cuda::unpack(a.dtype, two_shot ? mine : mine + kHalfBytes / 2,
                                    q.segment(packed), packed, r.count, 1.0, q.stream.get()),
              "the unpack kernel (peer allreduce)");
    }
    a.rounds.end_on_host(g);
    a.peers_done = true;
  }
}

bool peer_direct_allreduce(const PeerAllreduce& a, PeerTensors& peers, const DeviceSegment& t) {
  const int n = a.rounds.size();
  const int me = a.rounds.me();
  const uint64_t g = a.rounds.begin(a.peers_done);
  const SharedTensor input = share(t.input);
  const TensorNotes mine{input, t.output == t.input ? input : share(t.output)};
  std::memcpy(a.rounds.notes(me, g), &mine, sizeof mine);
  a.rounds.tell(&SegmentControl::staged, g);
  a.rounds.hear_all(&SegmentControl::staged, g);
  bool shareable = false;
  const std::vector<TensorNotes> all = notes_of_all(a.rounds, g, mine, shareable);
  if (!shareable) {  // every rank read the same notes, so all stage it
    a.rounds.end_on_host(g);
    return false;
  }
  // Each peer's allocation is opened once and kept (PeerTensors), so an
  // output in its input's allocation costs no second open.
  kernels::cuda::PeerBuffers buffers{};
  for (int lr = 0; lr < n; ++lr) {
    buffers.inputs[lr] =
        lr == me ? t.input : peers.open(a.rounds.global_of(lr), all[lr].input, a.q);
    buffers.outputs[lr] =
        lr == me ? t.output : peers.open(a.rounds.global_of(lr), all[lr].output, a.q);
  }
  // Every rank opened every peer's tensors before any kernel writes into a
  // peer's: a rank that fails to open one throws with its own tensors
  // untouched (its peers fail at the deadline, having written nothing).
  a.rounds.tell(&SegmentControl::reduced, g, 1);
  a.rounds.hear_all(&SegmentControl::reduced, g, 1);
  launch(a, buffers, g, t.count, true, a.prescale);
  a.rounds.end_on_host(g);
  a.peers_done = true;
  return true;
}

void throw_if_a_kernel_gave_up(const CudaIpcWindow& window, const std::vector<int>& globals,
                               int rank) {
  const uint64_t code = window.failure();
  if (code == 0) return;
  if (code == peer::kHostAbort) {
    throw common::Failure(ErrorKind::kShutdown, rank, -1,
                          "the runtime stopped while this device allreduce's kernels waited on "
                          "their peers (CUDA IPC): they were told to leave");
  }
  const int lr = peer::failed_peer(code);
  const int who = lr >= 0 && static_cast<size_t>(lr) < globals.size() ? globals[lr] : -1;
  const char* step = peer::failed_step(code) == peer::kArrived ? "arrive at" : "finish";
  throw common::Failure(
      ErrorKind::kTimeout, rank, who,
      "rank " + std::to_string(who) + " did not " + step + " round " +
          std::to_string(peer::failed_round(code)) +
          " of a device allreduce whose kernels wait on each other (CUDA IPC) within "
          "RINGLET_TIMEOUT_SECONDS; the kernels gave up, and every later collective on these "
          "ranks' window fails at once");
}

}  // namespace ringlet::core::gpu
