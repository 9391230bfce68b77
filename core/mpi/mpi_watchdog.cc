#include "core/mpi/mpi_watchdog.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <thread>

#include "ringlet/common/duration_text.h"
#include "ringlet/common/logging.h"

namespace ringlet::core::collectives {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(100);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

class Watchdog {
 public:
  void arm(const char* call, std::chrono::milliseconds timeout) {
    std::call_once(started_, [this] {
      thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
    });
    call_.store(call, std::memory_order_relaxed);
    timeout_ms_.store(timeout.count(), std::memory_order_relaxed);
    deadline_ns_.store(now_ns() + std::chrono::nanoseconds(timeout).count(),
                       std::memory_order_release);
  }
  void disarm() { deadline_ns_.store(0, std::memory_order_release); }

 private:
  void run(std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    while (!stop.stop_requested()) {
      cv.wait_for(lock, stop, kPoll, [] { return false; });
      const int64_t deadline = deadline_ns_.load(std::memory_order_acquire);
      if (deadline == 0 || now_ns() < deadline) continue;
      const char* call = call_.load(std::memory_order_relaxed);
      const std::chrono::milliseconds timeout(timeout_ms_.load(std::memory_order_relaxed));
      // A call that returned and a next one armed meanwhile have another deadline.
      if (deadline_ns_.load(std::memory_order_acquire) != deadline) continue;
      common::log(common::LogLevel::kError,
                  "%s has not returned after %s (RINGLET_TIMEOUT_SECONDS): a peer stopped taking "
                  "part in the collective, and MPI cannot cancel a blocking call, so the job is "
                  "ended (MPI_Abort)",
                  call, common::seconds_text(timeout).c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }

  std::atomic<const char*> call_{nullptr};
  std::atomic<int64_t> timeout_ms_{0};
  std::atomic<int64_t> deadline_ns_{0};  // 0: nothing watched
  std::once_flag started_;
  std::jthread thread_;  // last: stopped and joined before the fields above go
};

Watchdog& watchdog() {
  static Watchdog w;
  return w;
}

}  // namespace

MpiWatch::MpiWatch(const char* call, std::chrono::milliseconds timeout) {
  watchdog().arm(call, timeout);
}

MpiWatch::~MpiWatch() { watchdog().disarm(); }

}  // namespace ringlet::core::collectives
