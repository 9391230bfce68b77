#include "core/gpu/finalizer.h"

#include <sys/prctl.h>

#include <exception>
#include <optional>

#include "core/gpu/backoff.h"

namespace ringlet::core::gpu {

Finalizer::Finalizer() : thread_([this] { run(); }) {}

Finalizer::~Finalizer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Finalizer::watch(Poll poll, Completion done) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(poll), std::move(done)});
  }
  cv_.notify_one();
}

void Finalizer::drain() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void Finalizer::run() {
  // backoff()'s sleeps are 5 us; Linux's default 50 us timer slack would
  // stretch each of them tenfold, and a collective of a hundred microseconds
  // would be seen to end that much later.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  for (;;) {
    Entry e;
    {
      std::unique_lock lock(mu_);
      busy_ = false;
      if (queue_.empty()) idle_cv_.notify_all();
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything watched has ended
      e = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    std::optional<common::Failure> failure;
    try {
      for (int turns = 0; !e.poll(); backoff(turns)) {
      }
    } catch (const common::Failure& f) {
      failure = f;
    } catch (const std::exception& x) {
      failure = common::Failure(common::FailureKind::kInternal, x.what());
    }
    e.done(failure ? &*failure : nullptr);
  }
}

}  // namespace ringlet::core::gpu
