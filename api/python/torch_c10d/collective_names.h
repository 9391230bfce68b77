// The names one process group gives its collectives in Ringlet.
//
// Ringlet's response cache (HOROVOD_CACHE_CAPACITY) spares a collective its
// negotiation when its name ran before with the same metadata: the ranks then
// agree on it with one bit each. A name new on every call ("sequence 1, 2,
// 3, ...") never hits it. torch.distributed's collectives carry no name, but
// every rank of a group calls them in the same order, so a name may be any
// function of the sequence number that every rank computes alike:
// "torch.<group>.<slot>.<op>" with slot = sequence mod window.
//
// The window is a multiple of the group's period: a training step calls the
// same collectives on the same shapes in the same order, and when the window
// is a multiple of that count, each slot holds the same collective every step
// (and hits). Each rank finds the period of what it called (its signatures:
// op, dtypes, shapes) and the ranks agree on it at a few sequence numbers
// (one small allgather each, every rank at the same number): a period every
// rank found is taken, otherwise the default window stands. Names stay the
// same on every rank whatever they called, so a rank whose shapes differ
// gets Ringlet's usual mismatch error, not a stall.
//
// A slot is reused only once its previous collective has completed on this
// rank (Ringlet refuses a name already in flight): taking a slot still busy
// waits for it. That collective was submitted by every rank before (same
// order), so the wait ends.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ringlet::torch_c10d {

class CollectiveNames {
 public:
  // What a window starts as, and at least is: with no period found, names
  // repeat every 64 calls, which still hits for periods dividing 64.
  static constexpr uint64_t kDefaultWindow = 64;
  // The longest period looked for (collectives per step).
  static constexpr uint64_t kLongestPeriod = 256;

  // A slot held until the collective that took it has completed on this rank
  // (the Work drops it then, or when the submission failed).
  using Lease = std::shared_ptr<void>;

  struct Taken {
    uint64_t sequence;
    std::string name;
    Lease lease;
  };

  CollectiveNames(std::string group_name, int process_set);

  // The next collective's sequence number, name and slot. `signature`: a hash
  // of its op, dtypes and shapes. May wait for the slot (see above) and, at
  // an agreement point, for the other ranks to reach it; a failure there
  // throws ringlet::Error.
  Taken take(uint64_t signature, const char* op_title);

  uint64_t sequence() const { return sequence_; }
  uint64_t window() const { return window_; }

  // The smallest period of `history` (oldest first) up to kLongestPeriod that
  // repeats over all of it at least twice; 0 when none does.
  static uint64_t period_of(const std::vector<uint64_t>& history);
  // The window for an agreed period: a multiple of it, at least kDefaultWindow.
  static uint64_t window_for(uint64_t period);
  // Whether the ranks agree on the period at this sequence number.
  static bool agreement_point(uint64_t sequence);

 private:
  // Which slots are held; shared with the leases, which may outlive the
  // group (a Work kept by the program).
  struct Slots {
    std::mutex mutex;
    std::condition_variable freed;
    std::vector<bool> busy;
  };
  struct SlotRelease;  // a Lease's object
  static constexpr uint64_t kRecent = 2 * kLongestPeriod;

  Lease acquire(uint64_t slot);
  uint64_t agree(uint64_t local_period);

  std::string group_name_;
  int process_set_;
  uint64_t sequence_ = 0;
  uint64_t window_ = kDefaultWindow;
  std::vector<uint64_t> recent_;  // signature of call s at s % kRecent
  std::shared_ptr<Slots> slots_;
};

}  // namespace ringlet::torch_c10d
