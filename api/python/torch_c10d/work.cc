// The ringlet backend's Work and its completion thread (work.h).
#include "torch_c10d/work.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/exception.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace ringlet::torch_c10d {

// ---------------------------------------------------------------------------
// CompletionThread

CompletionThread& CompletionThread::get() {
  static CompletionThread* thread = new CompletionThread();  // never destroyed: see work.h
  return *thread;
}

CompletionThread::CompletionThread() {
  std::thread([this] { run(); }).detach();
}

void CompletionThread::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void CompletionThread::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return !tasks_.empty(); });
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();  // tasks catch their own errors (Work::complete)
  }
}

// ---------------------------------------------------------------------------
// Work

Work::Work(int rank, c10d::OpType type, const char* profiling_title,
           std::vector<at::Tensor> outputs, std::string what,
           const std::optional<std::vector<at::Tensor>>& inputs)
    : c10d::Work(rank, type, profiling_title, inputs),
      outputs_(std::move(outputs)),
      what_(std::move(what)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void Work::start(const std::vector<int64_t>& handles, Finish finish) {
  finish_ = std::move(finish);
  results_.resize(handles.size());
  pending_ = handles.size();
  if (handles.empty()) {
    held_.reset();
    claimed_ = true;
    c10::intrusive_ptr<Work> self = c10::intrusive_ptr<Work>::reclaim_copy(this);
    CompletionThread::get().post([self] { self->complete(); });
    return;
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    c10::intrusive_ptr<Work> self = c10::intrusive_ptr<Work>::reclaim_copy(this);
    ringlet::synchronize_then(handles[i],
                              [self, i](ringlet::Result result, std::exception_ptr error) {
                                self->on_handle(i, std::move(result), error);
                              });
  }
}

// On Ringlet's runtime thread (or this one): brief, no call into Ringlet.
void Work::on_handle(size_t index, ringlet::Result result, std::exception_ptr error) {
  bool post = false;
  std::shared_ptr<void> settled;  // dropped after the lock
  {
    std::lock_guard<std::mutex> lock(handles_mutex_);
    results_[index] = std::move(result);
    if (error && !first_error_) first_error_ = error;
    if (--pending_ == 0) {
      settled = std::move(held_);
      if (waiters_ > 0) {
        handles_done_.notify_all();  // a waiter completes it
      } else {
        claimed_ = post = true;
      }
    }
  }
  if (post) {
    c10::intrusive_ptr<Work> self = c10::intrusive_ptr<Work>::reclaim_copy(this);
    CompletionThread::get().post([self] { self->complete(); });
  }
}

bool Work::wait(std::chrono::milliseconds timeout) {
  // Nothing more comes from this thread to fuse with what it waits for. Only
  // a hint: a runtime already stopped has nothing to hold back.
  if (!isCompleted()) {
    try {
      ringlet::flush();
    } catch (const ringlet::Error&) {
    }
  }
  // One deadline for both waits: the handles', then c10d::Work's.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool complete_here = false;
  {
    std::unique_lock<std::mutex> lock(handles_mutex_);
    if (!claimed_) {
      ++waiters_;
      const auto done = [&] { return pending_ == 0; };
      if (timeout == kNoTimeout) {
        handles_done_.wait(lock, done);
      } else {
        handles_done_.wait_until(lock, deadline, done);
      }
      --waiters_;
      // Done while this thread waited: Ringlet's thread left it to a waiter.
      // Not done (timed out): with no waiter left, the last handle posts it.
      if (pending_ == 0 && !claimed_) claimed_ = complete_here = true;
    }
  }
  if (complete_here) complete();
  if (timeout == kNoTimeout) return c10d::Work::wait(timeout);
  // kNoTimeout is 0 ms: a deadline already passed waits 1 ms more, not forever.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return c10d::Work::wait(std::max(left, std::chrono::milliseconds(1)));
}

namespace {

// PyTorch's error for a collective that failed among the ranks
// (torch.distributed.DistBackendError, a RuntimeError).
std::exception_ptr backend_error(const std::string& what, const std::string& cause) {
  try {
    C10_THROW_ERROR(DistBackendError, "ringlet: " + what + " failed: " + cause);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

// On the completion thread.
void Work::complete() {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(handles_mutex_);
    error = first_error_;
  }
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      error = backend_error(what_, e.what());
    } catch (...) {
      error = backend_error(what_, "an unknown error");
    }
  } else {
    try {
      if (finish_) finish_(results_);
    } catch (const std::exception& e) {
      error = backend_error(what_, e.what());
    }
  }
  results_.clear();
  finish_ = nullptr;  // its captures (staging buffers) go now, not with the Work
  // The Work first, so that the Future's callbacks find it completed.
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace ringlet::torch_c10d
