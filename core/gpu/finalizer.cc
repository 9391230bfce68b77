#include "core/gpu/finalizer.h"

#include <chrono>
#include <exception>
#include <optional>

namespace ringlet::core::gpu {

namespace {

// Short waits first, so that a collective of a few microseconds is not
// charged a sleep; then sleeps, so that a long one leaves the core to the
// application's threads.
void pause(int& turns) {
  if (++turns < 256) return;
  std::this_thread::sleep_for(std::chrono::microseconds(turns < 1024 ? 5 : 50));
}

}  // namespace

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

void Finalizer::run() {
  for (;;) {
    Entry e;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything watched has ended
      e = std::move(queue_.front());
      queue_.pop_front();
    }
    std::optional<common::Failure> failure;
    try {
      for (int turns = 0; !e.poll(); pause(turns)) {
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
