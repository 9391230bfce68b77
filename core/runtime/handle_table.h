// Handles: the caller's side of a submitted collective. The runtime completes
// a handle once (done or failed); the caller polls, waits with a deadline, and
// finally takes the result, which releases the handle.
//
// take() has no deadline of its own while the runtime runs: how long a
// collective may wait for the other ranks to submit it is the stall rules'
// business (stall_inspector.h), and every wait on a peer has its own. Once the
// runtime closes the table (its loop ended), a handle that is still pending
// would never complete: take() gives it `grace` more, then fails.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/runtime/runtime_error.h"

namespace ringlet::core::runtime {

using Handle = int64_t;

// What a finished collective hands back. `data` is filled for the collectives
// whose output size is known only after negotiation (allgather, alltoall,
// reducescatter) of host tensors; of device tensors, their output is
// `device_data`, device memory of `device` that the runtime allocated
// (`device_bytes` of it), freed when its last owner lets go. `shape` is the
// output's shape for every collective; `received_splits` is alltoall's rows
// received from each rank.
struct Result {
  std::vector<std::byte> data;
  std::vector<int64_t> shape;
  std::vector<int64_t> received_splits;
  std::shared_ptr<void> device_data{};
  size_t device_bytes = 0;
  int32_t device = -1;
};

class HandleTable {
 public:
  // A fresh pending handle.
  Handle create();
  // Completes a handle (first completion wins). Unknown handles are ignored:
  // the caller may have released it already.
  void complete(Handle h, Result result);
  // Completes several under one lock and one wake-up (a fused response).
  void complete_all(std::vector<std::pair<Handle, Result>>& done);
  void fail(Handle h, common::Failure failure);
  void fail(Handle h, ErrorKind kind, const std::string& error) {
    fail(h, common::Failure(kind, error));
  }

  // Throws an invalid-argument common::Failure for an unknown (never issued or released) handle.
  bool poll(Handle h) const;
  // How wait() ended.
  enum class Waited {
    kCompleted,  // the handle completed: take() hands back its result or failure
    kTimedOut,   // still pending after `timeout`
    kAbandoned,  // still pending `grace` after close(): take() throws abandoned()
  };
  // Waits up to `timeout` for take() not to block, leaving the handle.
  Waited wait(Handle h, std::chrono::nanoseconds timeout, std::chrono::nanoseconds grace) const;
  // Waits for completion, releases the handle and returns its result, or
  // throws RuntimeError with the handle's error. After close(), a handle still
  // pending `grace` later fails with abandoned(h, grace).
  Result take(Handle h, std::chrono::nanoseconds grace);
  // The kShutdown failure of a handle still pending `grace` after close(),
  // naming why the runtime ended.
  RuntimeError abandoned(Handle h, std::chrono::nanoseconds grace) const;
  void release(Handle h);

  // What a handle ended with: its result, or the failure take() would throw.
  struct Outcome {
    std::optional<common::Failure> failure;
    Result result;
  };
  using Continuation = std::function<void(Outcome)>;
  // take() without a waiting thread: `then` receives the outcome once the
  // handle completes (on the completing thread, or at once on this one if it
  // has), and the handle is released. A handle still pending at close() ends
  // as kShutdown then. `then` runs outside the table's lock and must not
  // throw.
  void take_then(Handle h, Continuation then);

  size_t size() const;

  // Nothing will complete handles any more (`why`: the runtime's reason).
  void close(const std::string& why);

 private:
  struct State {
    bool done = false;
    std::optional<common::Failure> failure;
    Result result;
    Continuation then;  // set by take_then while pending
  };
  State& find(Handle h) const;  // mu_ held
  // Marks `it` done. A continued handle's state is taken out of the table and
  // returned, for run_then() once mu_ is released; otherwise nullptr. mu_ held.
  using Entry = std::unordered_map<Handle, std::unique_ptr<State>>::iterator;
  std::unique_ptr<State> finish(Entry it);
  static void run_then(std::unique_ptr<State> s);  // mu_ not held
  // A continued handle's failure when the runtime stopped first. mu_ held.
  common::Failure stopped_before(Handle h) const;
  RuntimeError abandoned_locked(Handle h, std::chrono::nanoseconds grace) const;  // mu_ held

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;  // notified on every completion
  std::unordered_map<Handle, std::unique_ptr<State>> states_;
  Handle next_ = 1;
  bool closed_ = false;
  std::chrono::steady_clock::time_point closed_at_;
  std::string closed_why_;
};

}  // namespace ringlet::core::runtime
