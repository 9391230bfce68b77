// The names of a process group's collectives (collective_names.h).
#include "torch_c10d/collective_names.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "ringlet/ringlet.h"

namespace ringlet::torch_c10d {

// Frees its slot when the collective that held it is done with it.
struct CollectiveNames::SlotRelease {
  std::shared_ptr<Slots> slots;
  uint64_t slot;
  SlotRelease(std::shared_ptr<Slots> s, uint64_t i) : slots(std::move(s)), slot(i) {}
  SlotRelease(const SlotRelease&) = delete;
  SlotRelease& operator=(const SlotRelease&) = delete;
  ~SlotRelease() {
    {
      std::lock_guard<std::mutex> lock(slots->mutex);
      slots->busy[slot] = false;
    }
    slots->freed.notify_all();
  }
};

CollectiveNames::CollectiveNames(std::string group_name, int process_set)
    : group_name_(std::move(group_name)),
      process_set_(process_set),
      recent_(kRecent),
      slots_(std::make_shared<Slots>()) {
  slots_->busy.assign(window_for(kLongestPeriod), false);  // the widest window
}

uint64_t CollectiveNames::period_of(const std::vector<uint64_t>& history) {
  const uint64_t n = history.size();
  for (uint64_t p = 1; p <= kLongestPeriod && 2 * p <= n; ++p) {
    bool repeats = true;
    for (uint64_t i = p; i < n && repeats; ++i) repeats = history[i] == history[i - p];
    if (repeats) return p;
  }
  return 0;
}

uint64_t CollectiveNames::window_for(uint64_t period) {
  if (period == 0) return kDefaultWindow;
  return period * ((kDefaultWindow + period - 1) / period);
}

bool CollectiveNames::agreement_point(uint64_t sequence) {
  // Early enough to serve a short job, then rarely: a job that changes its
  // step (evaluation, a new phase) is found again within 4096 calls.
  return sequence == 32 || sequence == 128 || sequence == 512 || sequence == 2048 ||
         (sequence > 0 && sequence % 4096 == 0);
}

CollectiveNames::Taken CollectiveNames::take(uint64_t signature, const char* op_title) {
  const uint64_t sequence = sequence_;
  if (agreement_point(sequence)) {
    std::vector<uint64_t> history;  // the last calls, oldest first
    for (uint64_t s = sequence - std::min(sequence, kRecent); s < sequence; ++s)
      history.push_back(recent_[s % kRecent]);
    window_ = window_for(agree(period_of(history)));
  }
  recent_[sequence % kRecent] = signature;
  ++sequence_;
  const uint64_t slot = sequence % window_;
  return {sequence, "torch." + group_name_ + "." + std::to_string(slot) + "." + op_title,
          acquire(slot)};
}

CollectiveNames::Lease CollectiveNames::acquire(uint64_t slot) {
  std::unique_lock<std::mutex> lock(slots_->mutex);
  if (slots_->busy[slot]) {
    lock.unlock();
    ringlet::flush();  // what this thread submitted need not wait for more
    lock.lock();
    // The slot's collective was submitted by every rank before this one, so
    // it completes or fails (and the Work drops the lease either way). Only a
    // runtime stopped under it could leave it held.
    while (slots_->busy[slot]) {
      slots_->freed.wait_for(lock, std::chrono::milliseconds(100));
      if (slots_->busy[slot] && !ringlet::is_initialized()) {
        throw ringlet::Error(ringlet::ErrorCode::kAborted,
                             "Ringlet stopped while this process group's collective in slot " +
                                 std::to_string(slot) + " was in flight");
      }
    }
  }
  slots_->busy[slot] = true;
  return std::make_shared<SlotRelease>(slots_, slot);
}

uint64_t CollectiveNames::agree(uint64_t local_period) {
  int64_t mine = static_cast<int64_t>(local_period);
  ringlet::Tensor t;
  t.data = &mine;
  t.dtype = ringlet::DataType::kInt64;
  t.shape = {1};
  const int64_t handle = ringlet::allgather_async(
      "torch." + group_name_ + ".period." + std::to_string(sequence_), t, process_set_);
  const ringlet::Result r = ringlet::synchronize(handle);
  std::vector<int64_t> periods(r.data.size() / sizeof(int64_t));
  std::memcpy(periods.data(), r.data.data(), periods.size() * sizeof(int64_t));
  const bool agreed = !periods.empty() && std::all_of(periods.begin(), periods.end(),
                                                      [&](int64_t p) { return p == mine; });
  return agreed ? local_period : 0;
}

}  // namespace ringlet::torch_c10d
