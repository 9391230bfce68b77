// How the direct algorithms lay out each rank's segment of the shared window,
// and the flag protocol they share.
//
//   [ control: staged | reduced | consumed | counts[2][local_size] ][ half 0 ][ half 1 ]
//
// Rounds: every window algorithm runs in rounds numbered by the workspace's
// counter, which advances identically on every rank (the number of rounds of a
// call follows from arguments all ranks share). Round g stages into half g%2.
// Flags hold (round << 32 | progress): they only ever grow, so nothing is
// reset between calls and a waiter simply asks "is it at least v?".
//   staged    slices of the round this rank has copied into its staging half
//   reduced   slices of its own part this rank has reduced (allreduce)
//   consumed  the last round in which this rank finished reading its peers
// Before staging round g a rank waits until every peer has consumed round g-2,
// the previous user of that half; with two halves that wait is nearly always
// already satisfied. Writers publish with release stores after the data (the
// kernels fence their streaming stores), readers load with acquire, and the
// writer rings the peers' doorbells so that sleepers wake.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/collectives/workspace.h"
#include "core/communicator.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::collectives {

inline constexpr uint64_t flag_value(uint64_t round, uint64_t progress) {
  return (round << 32) | progress;
}

struct alignas(64) PaddedFlag {
  std::atomic<uint64_t> value{0};
};

struct SegmentControl {
  PaddedFlag staged;
  PaddedFlag reduced;
  PaddedFlag consumed;
  // followed by uint64_t counts[2][local_size]
};

class WindowView {
 public:
  explicit WindowView(Communicator& comm)
      : comm_(comm), win_(*comm.window()), n_(win_.local_size()), me_(win_.local_rank()) {
    control_bytes_ = (sizeof(SegmentControl) + 2 * sizeof(uint64_t) * n_ + 4095) / 4096 * 4096;
    const size_t usable =
        win_.bytes_per_rank() > control_bytes_ ? win_.bytes_per_rank() - control_bytes_ : 0;
    half_bytes_ = usable / 2 / 4096 * 4096;
    if (half_bytes_ < 4096) {
      throw ConfigError("RINGLET_SHM_WINDOW_BYTES=" + std::to_string(win_.bytes_per_rank()) +
                        " is too small for the direct algorithms (need at least " +
                        std::to_string(control_bytes_ + 2 * 4096) + ")");
    }
  }

  int size() const { return n_; }
  int me() const { return me_; }
  size_t half_bytes() const { return half_bytes_; }
  // Elements of `es` bytes that one round stages: at most a half, and at most
  // direct_round_bytes, so that the staging areas in use (2 halves x ranks)
  // stay in the last-level cache and are reused hot round after round.
  size_t round_elems(size_t es) const {
    const size_t cap = std::max<size_t>(comm_.workspace().tuning.direct_round_bytes, 4096);
    return std::min(half_bytes_, cap) / es;
  }

  SegmentControl& control(int lr) const {
    return *reinterpret_cast<SegmentControl*>(win_.segment(lr));
  }
  uint64_t* counts(int lr, uint64_t round) const {
    return reinterpret_cast<uint64_t*>(win_.segment(lr) + sizeof(SegmentControl)) +
           (round % 2) * n_;
  }
  std::byte* staging(int lr, uint64_t round) const {
    return win_.segment(lr) + control_bytes_ + (round % 2) * half_bytes_;
  }
  // The world's rank of local rank lr (errors name world ranks, also in a
  // process set).
  int global(int lr) const {
    return comm_.global_rank(comm_.world().ranks_on_host[comm_.world().cross_rank][lr]);
  }

  void publish(PaddedFlag& f, uint64_t v) {
    f.value.store(v, std::memory_order_release);
    win_.ring_all();
  }
  void wait_at_least(int lr, PaddedFlag SegmentControl::*which, uint64_t v) {
    std::atomic<uint64_t>& a = (control(lr).*which).value;
    if (a.load(std::memory_order_acquire) >= v) return;
    win_.wait_until([&] { return a.load(std::memory_order_acquire) >= v; }, global(lr),
                    comm_.deadline());
  }
  // Every peer has consumed round g-2, so half g%2 may be overwritten.
  void wait_half_free(uint64_t g) {
    if (g < 3) return;
    for (int lr = 0; lr < n_; ++lr) {
      if (lr != me_) wait_at_least(lr, &SegmentControl::consumed, g - 2);
    }
  }
  void finish_round(uint64_t g) { publish(control(me_).consumed, g); }

  // Non-temporal stores pay for the output once a call's data is past the LLC
  // (staging stays in the cache and is written with ordinary stores).
  kernels::cpu::Store store_for(size_t bytes) const {
    return bytes >= comm_.workspace().tuning.stream_min_bytes ? kernels::cpu::Store::kStream
                                                              : kernels::cpu::Store::kNormal;
  }

 private:
  Communicator& comm_;
  transport::SharedWindow& win_;
  int n_, me_;
  size_t control_bytes_ = 0;
  size_t half_bytes_ = 0;
};

}  // namespace ringlet::core::collectives
