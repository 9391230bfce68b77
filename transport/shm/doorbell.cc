#include "shm/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace ringlet::transport::shm {
namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "futex needs a plain 32-bit word");

uint32_t* word(Doorbell& bell) { return reinterpret_cast<uint32_t*>(&bell.rings); }

}  // namespace

void ring(Doorbell& bell) {
  bell.rings.fetch_add(1, std::memory_order_seq_cst);
  if (bell.sleepers.load(std::memory_order_seq_cst) > 0) {
    ::syscall(SYS_futex, word(bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

void sleep_on(Doorbell& bell, uint32_t seen, std::chrono::microseconds timeout) {
  bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (bell.rings.load(std::memory_order_seq_cst) == seen) {
    timespec ts{static_cast<time_t>(timeout.count() / 1000000),
                static_cast<long>(timeout.count() % 1000000) * 1000};
    // Returns at a ring, the timeout, a signal or (EAGAIN) a ring that came
    // first; the caller re-checks its condition in every case.
    ::syscall(SYS_futex, word(bell), FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  bell.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace ringlet::transport::shm
