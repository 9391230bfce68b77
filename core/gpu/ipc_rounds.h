// The rounds of Ringlet's own device collectives over the CUDA IPC window
// (HOROVOD_GPU_OPERATIONS=RING, ranks of one host): which half a round uses,
// and the steps the ranks tell each other through the host's shared-memory
// window. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/collectives/window_layout.h"
#include "core/communicator.h"
#include "core/gpu/cuda_ipc_tensors.h"
#include "core/gpu/cuda_ipc_window.h"
#include "core/gpu/device_collectives.h"
#include "core/gpu/device_queue.h"
#include "core/gpu/round_plan.h"

namespace ringlet::core::gpu {

using collectives::flag_value;
using collectives::PaddedFlag;
using collectives::SegmentControl;

// Each rank's window is two halves of this: rounds of 32 MiB keep the host
// steps (three per round, each a few microseconds) far below the copying.
constexpr size_t kHalfBytes = size_t{32} << 20;

// The round protocol: the window's host flags, and on the device the peers'
// events behind each flag. The algorithms whose kernels wait on each other
// (ipc_peer_allreduce.cc) use the host flags only for what the host must
// know (the round's half is free, the peers' notes are written), never the
// events: their kernels order the device themselves.
class Rounds {
 public:
  Rounds(Communicator& comm, CudaIpcWindow& window, DeviceQueue& q)
      : comm_(comm), view_(comm), window_(window), q_(q) {}

  int size() const { return view_.size(); }
  int me() const { return view_.me(); }  // this rank's local rank

  // The next round: its half is free once every peer consumed it two rounds
  // ago (host) and their streams are past their reads of it (device). Where
  // the window's last device round ended with a kernel that waited for every
  // peer to finish with this rank's memory (`peers_done`), the streams need
  // not wait for the peers' events.
  uint64_t begin(bool peers_done = false) {
    const uint64_t g = comm_.workspace().next_round();
    view_.wait_half_free(g);
    if (g >= 3 && !peers_done) {
      for (int lr = 0; lr < size(); ++lr) {
        if (lr != me()) wait_for_event(lr);
      }
    }
    return g;
  }
  // Local rank lr's half of round g, as this process reaches it.
  std::byte* half(int lr, uint64_t g) const {
    return window_.buffer(rank_of(lr)) + (g % 2) * kHalfBytes;
  }
  // Local rank lr's notes of round g in the host's shared-memory window (its
  // half g%2, which the device path leaves unused): what a rank tells its
  // peers before it publishes staged. Every rank takes the same path for
  // each tensor: init() checked that the settings choosing it
  // (RINGLET_ALGORITHM, RINGLET_CUDA_IPC_DIRECT_BYTES) agree.
  std::byte* notes(int lr, uint64_t g) const { return view_.staging(lr, g); }
  // This rank's work queued so far is step `which` of round g, up to
  // `progress` (the ring counts its steps).
  void publish(PaddedFlag SegmentControl::*which, uint64_t g, uint64_t progress = 1) {
    record();
    view_.publish(view_.control(me()).*which, flag_value(g, progress));
  }
  // Waits until local rank lr has queued step `which` of round g, up to
  // `progress`, then makes the stream wait for it on the device.
  void wait(int lr, PaddedFlag SegmentControl::*which, uint64_t g, uint64_t progress = 1) {
    view_.wait_at_least(lr, which, flag_value(g, progress));
    wait_for_event(lr);
  }
  void wait_all(PaddedFlag SegmentControl::*which, uint64_t g, uint64_t progress = 1) {
    for (int lr = 0; lr < size(); ++lr) {
      if (lr != me()) wait(lr, which, g, progress);
    }
  }
  void end(uint64_t g) {
    record();
    view_.finish_round(g);
  }
  // The same steps for the host alone: `tell` publishes a step without an
  // event behind it, `hear` waits for a peer's on the host only.
  void tell(PaddedFlag SegmentControl::*which, uint64_t g, uint64_t progress = 1) {
    view_.publish(view_.control(me()).*which, flag_value(g, progress));
  }
  void hear_all(PaddedFlag SegmentControl::*which, uint64_t g, uint64_t progress = 1) {
    for (int lr = 0; lr < size(); ++lr) {
      if (lr != me()) view_.wait_at_least(lr, which, flag_value(g, progress));
    }
  }
  void end_on_host(uint64_t g) { view_.finish_round(g); }
  // The collective's last step: the stream waits until every peer is past its
  // reads of this rank's halves, so that the collective's end on this device
  // also means that no peer still reads them (and a window freed after it is
  // read by no one).
  void drain(uint64_t last) {
    for (int lr = 0; lr < size(); ++lr) {
      if (lr == me()) continue;
      view_.wait_at_least(lr, &SegmentControl::consumed, last);
      wait_for_event(lr);
    }
  }

  int global_of(int lr) const { return view_.global(lr); }
  // The communicator's rank of local rank lr.
  int rank_of(int lr) const {
    const World& w = comm_.world();
    return w.ranks_on_host[w.cross_rank][lr];
  }
  int local_of(int rank) const {
    for (int lr = 0; lr < size(); ++lr) {
      if (rank_of(lr) == rank) return lr;
    }
    return -1;
  }

 private:
  void record() {
    q_.check(cudaEventRecord(window_.event(rank_of(me())), q_.stream.get()),
             "cudaEventRecord of the interprocess event");
  }
  void wait_for_event(int lr) {
    q_.check(cudaStreamWaitEvent(q_.stream.get(), window_.event(rank_of(lr)), 0),
             "cudaStreamWaitEvent on a peer's interprocess event");
  }

  Communicator& comm_;
  collectives::WindowView view_;
  CudaIpcWindow& window_;
  DeviceQueue& q_;
};

// Every local rank's notes of round g, this rank's being `mine`, read once
// every peer has published staged for g; and whether every rank's tensors
// can be shared (every rank reads the same notes, so all decide alike).
inline std::vector<TensorNotes> notes_of_all(const Rounds& rounds, uint64_t g,
                                             const TensorNotes& mine, bool& shareable) {
  std::vector<TensorNotes> all(rounds.size());
  shareable = true;
  for (int lr = 0; lr < rounds.size(); ++lr) {
    if (lr == rounds.me()) {
      all[lr] = mine;
    } else {
      std::memcpy(&all[lr], rounds.notes(lr, g), sizeof(TensorNotes));
    }
    shareable = shareable && all[lr].input.shareable != 0 && all[lr].output.shareable != 0;
  }
  return all;
}

// The element counts of `tensors`, in order.
inline std::vector<size_t> counts_of(std::span<const DeviceSegment> tensors) {
  std::vector<size_t> counts;
  for (const DeviceSegment& t : tensors) counts.push_back(t.count);
  return counts;
}

// Appends `pieces` of `tensors` to q's segment table as kernel segments:
// from the inputs (pack) or to the outputs (unpack). Returns how many.
inline int add_pieces(DeviceQueue& q, std::span<const DeviceSegment> tensors,
                      const std::vector<Piece>& pieces, size_t es, bool inputs) {
  for (const Piece& x : pieces) {
    const DeviceSegment& t = tensors[x.tensor];
    void* tensor = inputs ? const_cast<void*>(t.input) : t.output;
    q.segment_table.push_back(
        {static_cast<std::byte*>(tensor) + x.tensor_offset * es, x.round_offset, x.count});
  }
  return static_cast<int>(pieces.size());
}

}  // namespace ringlet::core::gpu
