// What the algorithms keep between calls, owned by the communicator: the
// scratch slots of the ring (allocated once, at the first ring call), the
// request records (they outlive any unwinding: links are closed by abort()
// before the communicator, and so before these, goes away), the round counter
// of the window algorithms, and the tuning that the algorithm table and the
// algorithms read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "ringlet/transport/transport.h"

namespace ringlet::core::collectives {

// Sizes chosen by measurement on this machine (see the report in
// algorithm_table.cc). Tests may change them on a live communicator.
struct Tuning {
  size_t ring_slice_bytes = 256 << 10;    // one post on a ring link
  int ring_in_flight = 4;                 // posts outstanding per direction
  size_t direct_slice_bytes = 256 << 10;  // one ready flag in the window
  size_t direct_round_bytes = 1 << 20;    // staged per rank per round (cache-resident)
  size_t onestep_max_bytes = 8 << 10;     // one-step allreduce up to here...
  size_t onestep_max_oversubscribed_bytes = 128 << 10;  // ...or here, more ranks than cores
  size_t fusion_piece_bytes = 1 << 20;  // ring allreduce_segments: one pack/reduce/unpack
  size_t stream_min_bytes = 16 << 20;   // streamed output from here (half the LLC; set at create)
  size_t hierarchical_min_bytes = 256 << 10;  // hierarchical across hosts from here (unset switch)
  size_t device_onestep_max_bytes = 256 << 10;  // device one-shot up to here (kernels at once)
  bool oversubscribed = false;          // more local ranks than cores (set at create)
  // The most elements one MPI call moves (0: INT_MAX, MPI's own limit for an
  // int count). Larger messages go in pieces; tests lower it to reach them.
  size_t mpi_max_count = 0;
};

inline constexpr int kMaxInFlight = 16;

// Told the phases of an allreduce as they run (the runtime turns them into
// timeline activities and NVTX ranges). Phases are flat: end() closes the
// phase begin() opened before the next begin(). A phase concerns tensors
// [first, end) of an allreduce_segments call (all of them: 0, kAllTensors).
// Names are string literals:
//   ring      RING_REDUCESCATTER, RING_ALLGATHER (per call; for several
//             tensors also MEMCPY_IN_FUSION_BUFFER / MEMCPY_OUT_FUSION_BUFFER
//             around them, per fusion piece; for one prescaled tensor
//             PRESCALE before them)
//   direct    DIRECT_REDUCESCATTER (staging into the window and reducing this
//             rank's part), DIRECT_ALLGATHER (reading the reduced parts out),
//             per round; see direct_allreduce.cc
//   onestep   ONESTEP_ALLREDUCE
//   hierarchical  LOCAL_REDUCESCATTER, CROSS_ALLREDUCE, LOCAL_ALLGATHER (per
//             call; for several tensors per piece, between
//             MEMCPY_IN_FUSION_BUFFER and MEMCPY_OUT_FUSION_BUFFER; for one
//             prescaled tensor PRESCALE before them)
//   one rank  LOCAL_COPY
class PhaseObserver {
 public:
  static constexpr size_t kAllTensors = SIZE_MAX;
  virtual void begin(const char* phase, size_t first, size_t end) = 0;
  virtual void end() = 0;

 protected:
  ~PhaseObserver() = default;
};

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};

struct Workspace {
  Tuning tuning;

  // Ring scratch: 2 * in_flight + 2 slots of ring_slice_bytes.
  std::unique_ptr<std::byte, AlignedFree> scratch;
  size_t scratch_bytes = 0;
  std::byte* ring_scratch(size_t bytes) {
    if (bytes > scratch_bytes) {
      size_t rounded = (bytes + 4095) / 4096 * 4096;
      scratch.reset(static_cast<std::byte*>(std::aligned_alloc(4096, rounded)));
      if (!scratch) {
        throw common::Failure(
            common::FailureKind::kInternal,
            "out of memory for " + std::to_string(rounded) + " bytes of ring scratch");
      }
      scratch_bytes = rounded;
    }
    return scratch.get();
  }

  std::array<transport::Request, kMaxInFlight> send_reqs;
  std::array<transport::Request, kMaxInFlight> recv_reqs;

  // Window rounds: every rank runs the same rounds in the same order, so the
  // counter agrees everywhere. Starts at 1 so that zeroed flags mean "never".
  uint64_t round = 1;
  uint64_t next_round() { return round++; }

  // Per-peer values of the current alltoall (element offsets and counts), or
  // of the current hierarchical collective; and its per-host or per-local-rank
  // counts and offsets.
  std::vector<size_t> peer_offset, peer_count;
  std::vector<size_t> group_counts, group_offsets;
  // The inputs of one reduce_many over the window, one per local rank.
  std::vector<const void*> inputs;
  // Where allreduce_segments' tensors start in their concatenation (one more
  // entry than tensors), and the fusion buffer: the ring's (one piece), or the
  // MPI algorithms' (a fused message, or a copy of an input that overlaps the
  // output).
  std::vector<size_t> segment_start;
  std::vector<std::byte> fusion_buffer;
  // The MPI algorithms' per-rank counts and displacements (MPI takes int arrays).
  std::vector<int> mpi_send_counts, mpi_send_displs, mpi_recv_counts, mpi_recv_displs;

  // Set by whoever wants the phases (null otherwise: one branch per phase).
  PhaseObserver* phases = nullptr;

  // Collectives (bit c: Collective c) whose hierarchical switch is on but
  // whose flat algorithm runs, as logged once (choose_algorithm).
  uint32_t flat_despite_switch = 0;
  // What choose_algorithm() told the log: the table once, then each
  // collective's last algorithm (-1: none yet), so that a change is said.
  bool choices_told = false;
  std::array<int, 6> last_algorithm{-1, -1, -1, -1, -1, -1};
};

// Reports one phase for its lifetime (also when the algorithm throws);
// next() ends it and begins another.
class PhaseScope {
 public:
  PhaseScope(Workspace& ws, const char* phase, size_t first = 0,
             size_t end = PhaseObserver::kAllTensors)
      : obs_(ws.phases), first_(first), end_(end) {
    if (obs_) obs_->begin(phase, first_, end_);
  }
  ~PhaseScope() {
    if (obs_) obs_->end();
  }
  void next(const char* phase) {
    if (obs_) {
      obs_->end();
      obs_->begin(phase, first_, end_);
    }
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseObserver* obs_;
  size_t first_, end_;
};

}  // namespace ringlet::core::collectives
