// A torch.distributed Work over Ringlet handles: what a collective of the
// ringlet backend returns. It completes, as Gloo's does, once every handle it
// waits for has completed and its outputs hold the result: wait() blocks until
// then (or rethrows the failure), is_completed() asks, and get_future()'s
// Future completes with the output tensors or with the error.
//
// Ringlet calls back on its runtime's thread, where callbacks must be brief
// and must not call into Ringlet; copying results out and completing the
// Future (which runs the Future's callbacks, such as a DDP communication
// hook's continuation that starts the next collective) happen instead on the
// thread that waits for the Work, where one does (a synchronous call's: one
// wake-up from Ringlet's thread, as Ringlet's own synchronize() costs), or
// else on one completion thread of this process.
#pragma once

#include <ATen/core/ivalue.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "ringlet/ringlet.h"

namespace ringlet::torch_c10d {

// Runs posted tasks in order on one thread. Created on first use and never
// destroyed: the thread may still hold work when the process exits, and a
// static whose destructor joined it would hang or race at exit.
class CompletionThread {
 public:
  static CompletionThread& get();
  void post(std::function<void()> task);

 private:
  CompletionThread();
  void run();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
};

class Work : public c10d::Work {
 public:
  // Copies the handles' results into the outputs (or back into the caller's
  // non-contiguous tensors); runs on the completion thread; may throw, which
  // fails the Work.
  using Finish = std::function<void(std::vector<ringlet::Result>&)>;

  // `what` names the collective in errors: "all_reduce #3 of process group 0".
  // `inputs`: the op's input tensors, whose shapes the profiler's record of
  // the collective holds (as Gloo's and NCCL's do).
  Work(int rank, c10d::OpType type, const char* profiling_title, std::vector<at::Tensor> outputs,
       std::string what, const std::optional<std::vector<at::Tensor>>& inputs);

  // Follows the handles (in the order Finish expects their results). With no
  // handles the Work completes at once (after Finish).
  void start(const std::vector<int64_t>& handles, Finish finish);

  // Keeps `held` (the lease of its collective's name) until the handles have
  // completed on Ringlet's side, or the Work goes without starting.
  void hold_until_settled(std::shared_ptr<void> held) { held_ = std::move(held); }

  // Completes the Work on this thread once its handles have, unless the
  // completion thread took it first; then c10d::Work's wait.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void on_handle(size_t index, ringlet::Result result, std::exception_ptr error);
  void complete();

  std::vector<at::Tensor> outputs_;
  std::string what_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  Finish finish_;
  std::shared_ptr<void> held_;

  std::mutex handles_mutex_;  // guards the five below, written by Ringlet's thread
  std::vector<ringlet::Result> results_;
  size_t pending_ = 0;
  std::exception_ptr first_error_;
  int waiters_ = 0;       // threads in wait() that will complete the Work
  bool claimed_ = false;  // a thread is completing it (complete() runs once)
  std::condition_variable handles_done_;
};

}  // namespace ringlet::torch_c10d
