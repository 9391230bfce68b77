// The finalizer: one thread that watches the device collectives the runtime
// has started and reports each one's end, so that the runtime's loop goes on
// negotiating and starting the next ones while a device works. Collectives
// are watched in the order they were started (one stream per device runs
// them in that order). Nothing here knows CUDA: a watched collective is a
// poll function.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "ringlet/common/failure.h"

namespace ringlet::core::gpu {

class Finalizer {
 public:
  // Returns true once the collective is done; throws (a common::Failure, or
  // anything else, reported as internal) once it failed. It is called again
  // and again until then, so each call must be short and the poll must end by
  // itself (at its deadline at the latest).
  using Poll = std::function<bool()>;
  // Called once on the finalizer's thread: null when the collective is done,
  // else why it failed. Must not throw.
  using Completion = std::function<void(const common::Failure* failure)>;

  Finalizer();
  // Waits for every collective already watched to end, then stops the thread.
  ~Finalizer();
  Finalizer(const Finalizer&) = delete;
  Finalizer& operator=(const Finalizer&) = delete;

  void watch(Poll poll, Completion done);
  // Waits until every collective watched so far has ended (each poll ends by
  // its deadline at the latest), so that what they use may go.
  void drain();

 private:
  struct Entry {
    Poll poll;
    Completion done;
  };
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
  bool busy_ = false;  // an entry taken off the queue is being watched
  std::condition_variable idle_cv_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace ringlet::core::gpu
