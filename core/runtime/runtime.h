// The runtime: asynchronous named collectives driven by one background thread
// per process, which owns the Communicator (driven by one thread at a time).
//
// Life of a request: enqueue_*() checks it, refuses a name already in flight
// on this rank, queues it and wakes the loop. Each cycle the loop sends the
// names newly ready here to every rank (see negotiation.h), and every rank
// derives the same ordered list of responses: collectives whose name is ready
// everywhere, validated across ranks, allreduces fused up to the fusion
// threshold. It runs them, completes the handles, and sleeps until the next
// cycle (HOROVOD_CYCLE_TIME) or until work arrives, whichever is first; after
// being woken by work it holds back only while the caller is still submitting
// (a burst of gradients), since only then can waiting gain fusion.
//
// In steady state (the same names each step) a rank reports a ready tensor as
// one bit of the response cache instead of its metadata (response_cache.h).
//
// Failures: a mismatch fails that name's handle on every rank; a lost peer or
// timeout in a collective fails every pending handle on every surviving rank
// with the collective's error (which names the peer) and stops the runtime.
// shutdown() on any rank stops the runtime on every rank at the same cycle;
// what was not ready on every rank by then fails with a message saying so.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <set>
#include <unordered_set>
#include <vector>

#include "core/communicator.h"
#include "core/runtime/handle_table.h"
#include "core/runtime/request.h"
#include "core/runtime/response_cache.h"
#include "core/runtime/runtime_error.h"

namespace ringlet::core::timeline {
class Timeline;
}

namespace ringlet::core::runtime {

class Negotiator;
struct Response;
struct RankMessage;

// Counters of the loop, for tests and benchmarks.
struct Stats {
  uint64_t cycles = 0;            // negotiation rounds
  uint64_t collectives = 0;       // collectives run (a fused allreduce counts once)
  uint64_t tensors = 0;           // tensors completed successfully
  uint64_t fused_tensors = 0;     // of them, run inside a fused allreduce of >= 2
  uint64_t negotiation_overflows = 0;  // cycles that needed a second exchange
  uint64_t stall_warnings = 0;         // rank 0: stall warnings printed
  uint64_t cached_tensors = 0;         // tensors agreed through the response cache
};

class Runtime {
 public:
  // Takes the communicator and starts the background thread. Config (cycle
  // time, fusion threshold, timeline, NVTX) comes from comm->config().
  explicit Runtime(std::unique_ptr<Communicator> comm);
  // shutdown(), then releases the communicator.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Shapes are in elements per dimension; an empty shape is a scalar.
  // All enqueue_* throw RuntimeError (bad arguments, duplicate name in flight,
  // runtime stopped) and never block on other ranks.
  Handle enqueue_allreduce(std::string name, const void* input, void* output, std::vector<int64_t> shape,
                           DataType dtype, ReduceOp op = ReduceOp::kSum, double prescale = 1.0,
                           double postscale = 1.0, Device device = {});
  // Ranks may differ in the first dimension; the output (shape [sum of first
  // dims, rest...]) is allocated by the runtime: synchronize() returns it.
  Handle enqueue_allgather(std::string name, const void* input, std::vector<int64_t> shape, DataType dtype,
                           Device device = {});
  // In place on `buffer` (root's data is sent, the others' overwritten).
  Handle enqueue_broadcast(std::string name, void* buffer, std::vector<int64_t> shape, DataType dtype, int root,
                           Device device = {});
  // Horovod's split: rank r receives rows [offset_r, offset_r + n_r) of the
  // reduction, n_r = d0/size (+1 for r < d0 % size). Output from synchronize().
  Handle enqueue_reducescatter(std::string name, const void* input, std::vector<int64_t> shape, DataType dtype,
                               ReduceOp op = ReduceOp::kSum, double prescale = 1.0, double postscale = 1.0,
                               Device device = {});
  // splits[j] rows of dim 0 go to rank j (empty: an even split). Output and
  // the rows received from each rank come from synchronize().
  Handle enqueue_alltoall(std::string name, const void* input, std::vector<int64_t> shape, DataType dtype,
                          std::vector<int64_t> splits = {}, Device device = {});
  Handle enqueue(Request request);
  // Allreduces that run together, fused atomically (whatever the fusion
  // threshold) once every member is ready on every rank. Members share dtype,
  // op and scale factors. Every rank must call it in the same order (the
  // group's id is its sequence number). One handle per member.
  struct GroupMember {
    std::string name;
    const void* input;
    void* output;
    std::vector<int64_t> shape;
  };
  std::vector<Handle> enqueue_grouped_allreduce(std::vector<GroupMember> members, DataType dtype,
                                                ReduceOp op = ReduceOp::kSum, double prescale = 1.0,
                                                double postscale = 1.0, Device device = {});
  // Completes once every rank has submitted its barrier of the same sequence
  // number (the n-th barrier of each rank meets the n-th of the others).
  Handle enqueue_barrier();
  void barrier();
  // Horovod's join(): this rank has run out of data. Until every rank has
  // joined, the others' allreduces run with this rank contributing zeros
  // (Average still divides by the full size); other collectives fail while a
  // rank is joined, and this rank may submit nothing. The handle's result
  // data holds the last rank to join as an int32; join() returns it.
  Handle enqueue_join();
  int join();

  bool poll(Handle h) const { return handles_.poll(h); }
  bool wait(Handle h, std::chrono::nanoseconds timeout) const { return handles_.wait(h, timeout); }
  // Waits, releases the handle, and returns its result or throws RuntimeError.
  Result synchronize(Handle h) { return handles_.take(h); }
  void release(Handle h) { handles_.release(h); }

  // Stops the loop on every rank (see above), fails what is left, and
  // releases the communicator. Idempotent.
  void shutdown();
  // Empty while running; else why it stopped (shutdown, or the failure).
  std::string stopped_reason() const;

  // Rank 0 writes the timeline; other ranks accept and ignore the calls.
  // stop_timeline() returns once the file is complete and closed (the loop
  // lets go of it at the end of its cycle).
  void start_timeline(const std::string& path, bool mark_cycles = false);
  void stop_timeline();

  Stats stats() const;

 private:
  struct Pending {
    Request request;
    Handle handle;
  };

  void loop();
  bool wait_for_work();  // false: leave the loop
  std::vector<RankMessage> exchange(const RankMessage& mine);
  void final_barrier();
  // `tl`: the timeline of the cycle (null: none), so that a span opened in a
  // cycle is closed in the same file.
  void execute(const Response& r, timeline::Timeline* tl);
  void inspect_stalls(const std::vector<RankMessage>& messages);
  void set_cached_bits(RankMessage& mine);
  std::vector<Response> cached_responses(const std::vector<RankMessage>& messages);
  void run_allreduce(const Response& r, std::vector<Pending*>& items, timeline::Timeline* tl);
  Result run_single(const Response& r, Pending& p, timeline::Timeline* tl);
  void count_run(const Response& r);
  void finish(const std::string& name, Result result);
  void fail(const std::string& name, const std::string& error);
  void fail_everything(const std::string& error);

  std::unique_ptr<Communicator> comm_;
  const int rank_;
  const int size_;
  const int64_t fusion_threshold_;
  const std::chrono::nanoseconds cycle_time_;

  HandleTable handles_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::vector<Pending> queue_;                   // submitted, not yet reported
  std::unordered_set<std::string> in_flight_;    // names submitted and not completed
  std::chrono::steady_clock::time_point last_enqueue_{};
  bool shutdown_requested_ = false;
  bool loop_idle_ = false;
  bool join_requested_ = false;                  // join() until every rank joined
  Handle join_handle_ = 0;                       // the loop waits for work (wake it)
  uint64_t barrier_sequence_ = 0;
  uint64_t group_sequence_ = 0;
  std::string stopped_;                          // why the loop ended
  std::shared_ptr<timeline::Timeline> timeline_;
  Stats stats_;

  // Loop thread only.
  std::unique_ptr<Negotiator> negotiator_;
  ResponseCache cache_;
  std::set<std::string> cached_pending_;               // reported by cache bit, not yet run
  bool join_sent_ = false;                             // this rank's join flag went out
  std::unordered_map<std::string, Pending> reported_;  // reported, awaiting a response
  std::vector<std::byte> fusion_buffer_;
  std::vector<char> slots_;                            // negotiation exchange
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> first_seen_;  // rank 0: stalls
  std::chrono::steady_clock::time_point last_stall_check_ = std::chrono::steady_clock::now();
  std::string pending_abort_;                          // rank 0: stall shutdown to announce

  std::thread thread_;
};

}  // namespace ringlet::core::runtime
