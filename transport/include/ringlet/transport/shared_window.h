// A shared-memory window: every rank of one host exposes one segment, and every
// rank of that host maps all of them. Collectives inside a host read their
// peers' data in place through it instead of passing slices around a ring.
//
// The window only provides memory, a doorbell per rank and liveness; the
// meaning of the bytes (data areas, ready flags) belongs to the algorithm.
// Segments are unlinked as soon as every local rank has mapped them, so a
// rank killed at any later moment leaves nothing in /dev/shm.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ringlet/transport/transport.h"

namespace ringlet::transport {

// Lives in shared memory. ring() wakes a rank sleeping in wait_for_ring().
struct alignas(64) Doorbell {
  std::atomic<uint32_t> rings{0};
  std::atomic<uint32_t> sleepers{0};
};

// How a waiting rank trades latency for CPU. Spinning is fastest while the
// rank has a core to itself; with more ranks than cores it steals the core
// from the rank that would make progress, so after a while it yields, then
// sleeps on a futex.
struct WaitPolicy {
  int spin_iterations = 2000;
  // When set, spinning goes on until this much time has passed, whatever
  // the count (RINGLET_SPIN=auto). A fixed count is a different time on
  // every CPU; what matters is outlasting a peer busy with one round of a
  // collective, so that the waiting rank never pays for a futex sleep and a
  // wake-up between rounds.
  std::chrono::microseconds spin_time{0};
  int yield_iterations = 50;
  std::chrono::microseconds sleep_slice{2000};  // re-checks liveness between slices
};

class SharedWindow {
 public:
  struct Options {
    int local_rank = 0;
    int local_size = 1;
    std::vector<int> global_ranks;  // global rank of each local rank
    size_t bytes_per_rank = 0;      // usable bytes in each rank's segment
    std::string job_id;
    // Names this window within the job, the same on every member; needed
    // where members differ in how many windows they created before (process
    // sets). Empty: windows are told apart by their order of creation in the
    // process, which every rank of the job shares.
    std::string name;
    KeyValue* store = nullptr;
    WaitPolicy wait;
  };

  // Collective over the local ranks of the host.
  static std::unique_ptr<SharedWindow> create(const Options& options, Deadline deadline);

  virtual ~SharedWindow() = default;

  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual size_t bytes_per_rank() const = 0;
  // The segment of `local_rank` as mapped in this process (64-byte aligned).
  virtual std::byte* segment(int local_rank) const = 0;

  // Wakes `local_rank` if it sleeps in wait_until().
  virtual void ring(int local_rank) = 0;
  virtual void ring_all() = 0;

  // Waits until ready() is true: spins, yields, then sleeps on this rank's
  // doorbell. Between sleeps it checks that the local peers are alive and
  // that nobody marked the window failed. Throws PeerLost naming a dead peer,
  // Timeout naming `waiting_for` (a global rank) at the deadline.
  template <class Ready>
  void wait_until(Ready&& ready, int waiting_for, Deadline deadline);

  // Marks the window failed (another rank saw an error) and wakes everyone,
  // so peers stop waiting at once instead of at their deadline.
  virtual void abort(const common::Failure& why) = 0;
  // Throws PeerLost if a local peer died or the window was aborted. Aborted
  // because a peer was lost, it names that peer (learnt second-hand), else
  // the rank that aborted.
  virtual void check_peers() = 0;

  // How waits spin, yield and sleep from now on (the runtime adds a busy
  // thread per rank, which changes whether spinning pays).
  virtual void set_wait_policy(const WaitPolicy& policy) = 0;

 protected:
  // One round of the blocking part of wait_until: sleeps on this rank's
  // doorbell unless it rang since `seen`; returns the current ring count.
  virtual uint32_t doorbell_rings() const = 0;
  virtual void sleep_on_doorbell(uint32_t seen, std::chrono::microseconds timeout) = 0;
  virtual const WaitPolicy& policy() const = 0;
};

template <class Ready>
void SharedWindow::wait_until(Ready&& ready, int waiting_for, Deadline deadline) {
  const WaitPolicy& p = policy();
  const Clock::time_point spin_end = Clock::now() + p.spin_time;
  for (int i = 0;; ++i) {
    if (ready()) return;
    if (i >= p.spin_iterations &&
        (p.spin_time.count() == 0 || ((i & 63) == 0 && Clock::now() >= spin_end))) {
      break;
    }
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  for (int i = 0; i < p.yield_iterations; ++i) {
    if (ready()) return;
    ::sched_yield();
  }
  for (;;) {
    uint32_t seen = doorbell_rings();
    if (ready()) return;
    try {
      check_peers();
    } catch (const PeerLost&) {
      // A peer may publish what we wait for and close its window between
      // the two checks (the last step of a barrier before it leaves): its
      // segment stays mapped here, so look once more before calling it lost.
      if (ready()) return;
      throw;
    }
    if (Clock::now() >= deadline) {
      throw Timeout(waiting_for, "timed out waiting for rank " + std::to_string(waiting_for));
    }
    sleep_on_doorbell(seen, p.sleep_slice);
  }
}

}  // namespace ringlet::transport
