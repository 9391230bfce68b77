#include "core/runtime/handle_table.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "core/runtime/runtime_error.h"

namespace ringlet::core::runtime {

Handle HandleTable::create() {
  std::lock_guard lock(mu_);
  const Handle h = next_++;
  states_.emplace(h, std::make_unique<State>());
  return h;
}

std::unique_ptr<HandleTable::State> HandleTable::finish(Entry it) {
  it->second->done = true;
  if (!it->second->then) return nullptr;
  std::unique_ptr<State> s = std::move(it->second);
  states_.erase(it);
  return s;
}

void HandleTable::run_then(std::unique_ptr<State> s) {
  if (s) s->then(Outcome{std::move(s->failure), std::move(s->result)});
}

void HandleTable::complete(Handle h, Result result) {
  std::unique_ptr<State> continued;
  {
    std::lock_guard lock(mu_);
    auto it = states_.find(h);
    if (it == states_.end() || it->second->done) return;
    it->second->result = std::move(result);
    continued = finish(it);
  }
  cv_.notify_all();
  run_then(std::move(continued));
}

void HandleTable::complete_all(std::vector<std::pair<Handle, Result>>& done) {
  std::vector<std::unique_ptr<State>> continued;
  {
    std::lock_guard lock(mu_);
    for (auto& [h, result] : done) {
      auto it = states_.find(h);
      if (it == states_.end() || it->second->done) continue;
      it->second->result = std::move(result);
      if (auto s = finish(it)) continued.push_back(std::move(s));
    }
  }
  cv_.notify_all();
  for (auto& s : continued) run_then(std::move(s));
}

void HandleTable::fail(Handle h, common::Failure failure) {
  std::unique_ptr<State> continued;
  {
    std::lock_guard lock(mu_);
    auto it = states_.find(h);
    if (it == states_.end() || it->second->done) return;
    it->second->failure = std::move(failure);
    continued = finish(it);
  }
  cv_.notify_all();
  run_then(std::move(continued));
}

common::Failure HandleTable::stopped_before(Handle h) const {
  return common::Failure(ErrorKind::kShutdown, "handle " + std::to_string(h) +
                                                   " was pending when the runtime stopped (" +
                                                   closed_why_ + ")");
}

void HandleTable::take_then(Handle h, Continuation then) {
  std::unique_ptr<State> now;
  {
    std::lock_guard lock(mu_);
    State& s = find(h);
    if (s.then) throw common::caller_error("handle " + std::to_string(h) + " is already taken");
    s.then = std::move(then);
    if (s.done) {
      now = finish(states_.find(h));
    } else if (closed_) {
      s.failure = stopped_before(h);
      now = finish(states_.find(h));
    }
  }
  run_then(std::move(now));
}

HandleTable::State& HandleTable::find(Handle h) const {
  auto it = states_.find(h);
  if (it == states_.end()) {
    throw common::caller_error("unknown handle " + std::to_string(h) +
                               " (never issued, or already synchronized/released)");
  }
  return *it->second;
}

bool HandleTable::poll(Handle h) const {
  std::lock_guard lock(mu_);
  return find(h).done;
}

HandleTable::Waited HandleTable::wait(Handle h, std::chrono::nanoseconds timeout,
                                      std::chrono::nanoseconds grace) const {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mu_);
  find(h);
  const auto deadline = Clock::now() + timeout;
  auto state = [&] {
    auto it = states_.find(h);
    if (it == states_.end() || it->second->done) return Waited::kCompleted;
    if (closed_ && Clock::now() >= closed_at_ + grace) return Waited::kAbandoned;
    return Waited::kTimedOut;
  };
  for (;;) {
    const Waited now = state();
    if (now != Waited::kTimedOut || Clock::now() >= deadline) return now;
    // Nothing notifies when a closed table's grace runs out: wake for it.
    const auto until = closed_ ? std::min(deadline, closed_at_ + grace) : deadline;
    cv_.wait_until(lock, until);
  }
}

RuntimeError HandleTable::abandoned_locked(Handle h, std::chrono::nanoseconds grace) const {
  const auto seconds = std::chrono::duration_cast<std::chrono::milliseconds>(grace).count() / 1e3;
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return RuntimeError(ErrorKind::kShutdown, "handle " + std::to_string(h) + " was still pending " +
                                                text + " s after the runtime stopped (" +
                                                closed_why_ + "); nothing will complete it");
}

RuntimeError HandleTable::abandoned(Handle h, std::chrono::nanoseconds grace) const {
  std::lock_guard lock(mu_);
  return abandoned_locked(h, grace);
}

Result HandleTable::take(Handle h, std::chrono::nanoseconds grace) {
  std::unique_lock lock(mu_);
  find(h);
  auto done = [&] {
    auto it = states_.find(h);
    return it == states_.end() || it->second->done;
  };
  cv_.wait(lock, [&] { return closed_ || done(); });
  if (!done() && !cv_.wait_until(lock, closed_at_ + grace, done)) throw abandoned_locked(h, grace);
  auto it = states_.find(h);
  if (it == states_.end())
    throw common::caller_error("handle " + std::to_string(h) + " released while waited on");
  std::unique_ptr<State> s = std::move(it->second);
  states_.erase(it);
  lock.unlock();
  if (s->failure) throw RuntimeError(*s->failure);
  return std::move(s->result);
}

void HandleTable::release(Handle h) {
  std::lock_guard lock(mu_);
  states_.erase(h);
}

void HandleTable::close(const std::string& why) {
  // Nobody waits on a continued handle to give it take()'s grace: it ends now.
  std::vector<std::unique_ptr<State>> continued;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    closed_at_ = std::chrono::steady_clock::now();
    closed_why_ = why.empty() ? "stopped" : why;
    for (auto it = states_.begin(); it != states_.end();) {
      auto next = std::next(it);
      if (!it->second->done && it->second->then) {
        it->second->failure = stopped_before(it->first);
        continued.push_back(finish(it));
      }
      it = next;
    }
  }
  cv_.notify_all();
  for (auto& s : continued) run_then(std::move(s));
}

size_t HandleTable::size() const {
  std::lock_guard lock(mu_);
  return states_.size();
}

}  // namespace ringlet::core::runtime
