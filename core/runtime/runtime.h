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
// Process sets: each set of which this rank is a member has its own
// negotiation, response cache and communicator (its links are the world's;
// on one host it has a shared window of its own). A cycle negotiates the
// world first (it carries shutdown, stall aborts, join and the changes to the
// sets, which every rank applies at the same cycle), then every other set in
// the order of their ids: the same order on every member, so no two ranks
// ever wait on each other across sets.
//
// The loop's parts live in files of their own, each testable without a
// communicator: negotiation.h (what runs next), cache_coordinator.h (the
// response cache's bits), stall_inspector.h (names some ranks never submit),
// process_set_table.h (the sets and their changes) and request_validation.h
// (what a submission must satisfy). runtime.cc keeps the loop and the
// hand-off between the callers' threads and it; runtime_negotiate.cc is one
// cycle's negotiation over a set, runtime_process_sets.cc the sets' life and
// runtime_execute.cc the running of what was agreed on host memory,
// runtime_device.cc on device memory (output_layout.h: the output sizes
// both share).
//
// Failures: a mismatch fails that name's handle on every rank; a name that
// some ranks never submit fails on every rank that did after
// RINGLET_STALL_TIMEOUT_SECONDS (the runtime goes on); a lost peer or timeout
// in a collective fails every pending handle on every surviving rank with the
// collective's error (which names the peer) and stops the runtime.
// shutdown() on any rank stops the runtime on every rank at the same cycle;
// what was not ready on every rank by then fails with a message saying so.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/communicator.h"
#include "core/gpu/device_collectives.h"
#include "core/runtime/cache_coordinator.h"
#include "core/runtime/handle_table.h"
#include "core/runtime/negotiation.h"
#include "core/runtime/process_set_table.h"
#include "core/runtime/request.h"
#include "core/runtime/runtime_error.h"
#include "core/runtime/stall_inspector.h"

namespace ringlet::core::timeline {
class Timeline;
}

namespace ringlet::core::runtime {

// Counters of the loop, for tests and benchmarks.
struct Stats {
  uint64_t cycles = 0;                 // negotiation rounds
  uint64_t collectives = 0;            // collectives run (a fused allreduce counts once)
  uint64_t tensors = 0;                // tensors completed successfully
  uint64_t fused_tensors = 0;          // of them, run inside a fused allreduce of >= 2
  uint64_t negotiation_overflows = 0;  // cycles that needed a second exchange
  uint64_t stall_warnings = 0;         // rank 0: stall warnings printed
  uint64_t cached_tensors = 0;         // tensors agreed through the response cache
};

class Runtime {
 public:
  // Takes the communicator and starts the background thread. Config (cycle
  // time, fusion threshold, timeline, NVTX) comes from comm->config().
  // `process_sets` are created before the first cycle, with ids 1, 2, ... in
  // the order given (every rank must pass the same list).
  explicit Runtime(std::unique_ptr<Communicator> comm,
                   std::vector<std::vector<int>> process_sets = {});
  // shutdown(), then releases the communicator.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Shapes are in elements per dimension; an empty shape is a scalar.
  // `process_set` is the set the collective runs on (0: the world); the
  // ranks that take part, split counts and sizes are the set's, while a
  // broadcast's root stays a global rank, as in Horovod.
  // All enqueue_* throw RuntimeError (bad arguments, duplicate name in flight,
  // runtime stopped) and never block on other ranks.
  Handle enqueue_allreduce(std::string name, const void* input, void* output,
                           std::vector<int64_t> shape, DataType dtype, ReduceOp op = ReduceOp::kSum,
                           double prescale = 1.0, double postscale = 1.0, Device device = {},
                           int32_t process_set = 0);
  // Ranks may differ in the first dimension; the output (shape [sum of first
  // dims, rest...]) is allocated by the runtime: synchronize() returns it.
  Handle enqueue_allgather(std::string name, const void* input, std::vector<int64_t> shape,
                           DataType dtype, Device device = {}, int32_t process_set = 0);
  // In place on `buffer` (root's data is sent, the others' overwritten).
  Handle enqueue_broadcast(std::string name, void* buffer, std::vector<int64_t> shape,
                           DataType dtype, int root, Device device = {}, int32_t process_set = 0);
  // Horovod's split: rank r receives rows [offset_r, offset_r + n_r) of the
  // reduction, n_r = d0/size (+1 for r < d0 % size). Output from synchronize().
  Handle enqueue_reducescatter(std::string name, const void* input, std::vector<int64_t> shape,
                               DataType dtype, ReduceOp op = ReduceOp::kSum, double prescale = 1.0,
                               double postscale = 1.0, Device device = {}, int32_t process_set = 0);
  // splits[j] rows of dim 0 go to rank j (empty: an even split). Output and
  // the rows received from each rank come from synchronize().
  Handle enqueue_alltoall(std::string name, const void* input, std::vector<int64_t> shape,
                          DataType dtype, std::vector<int64_t> splits = {}, Device device = {},
                          int32_t process_set = 0);
  // Point to point: `name` meets the recv of the same name on rank `to`
  // (global ranks, members of the set), which receives into `output` as
  // many elements of the same dtype (its shape may differ). Each runs when
  // both ranks submitted it; the other members take no part. Ranks name their
  // transfers so that the n-th transfer between two ranks has one name on
  // both (ringlet.torch.distributed counts them per pair and tag).
  Handle enqueue_send(std::string name, const void* input, std::vector<int64_t> shape,
                      DataType dtype, int to, Device device = {}, int32_t process_set = 0);
  Handle enqueue_recv(std::string name, void* output, std::vector<int64_t> shape, DataType dtype,
                      int from, Device device = {}, int32_t process_set = 0);
  Handle enqueue(Request request);
  // Allreduces that run together, fused atomically (whatever the fusion
  // threshold) once every member is ready on every rank. Members share dtype,
  // op and scale factors. Every rank of the set must call it in the same
  // order (the group's id is its sequence number in the set). One handle per
  // member.
  struct GroupMember {
    std::string name;
    const void* input;
    void* output;
    std::vector<int64_t> shape;
  };
  std::vector<Handle> enqueue_grouped_allreduce(std::vector<GroupMember> members, DataType dtype,
                                                ReduceOp op = ReduceOp::kSum, double prescale = 1.0,
                                                double postscale = 1.0, Device device = {},
                                                int32_t process_set = 0);
  // Completes once every rank of the set has submitted its barrier of the
  // same sequence number (the n-th barrier of each rank meets the n-th of the
  // others).
  Handle enqueue_barrier(int32_t process_set = 0);
  void barrier(int32_t process_set = 0);
  // Horovod's join(): this rank has run out of data. Until every rank has
  // joined, the others' allreduces run with this rank contributing zeros
  // (Average still divides by the full size); other collectives fail while a
  // rank is joined, and this rank may submit nothing. The handle's result
  // data holds the last rank to join as an int32; join() returns it.
  Handle enqueue_join();
  int join();

  // Process sets: subsets of the world's ranks that negotiate and run
  // collectives on their own (Request::meta.process_set names the set; 0 is
  // the world). Adding and removing are collective over the whole world:
  // every rank calls them in the same order with the same arguments, and
  // they return once every rank has. Ranks are global ranks (sorted and
  // checked); add returns the new set's id. Removing fails what is pending
  // on the set. Both throw RuntimeError (kInvalidArgument for bad ranks or an
  // unknown id, kMismatch when the ranks called them with different
  // arguments).
  int32_t add_process_set(std::vector<int> ranks);
  void remove_process_set(int32_t id);
  // Global ranks of a set, ascending; throws kInvalidArgument for an unknown id.
  std::vector<int> process_set_ranks(int32_t id) const;
  // Ids of the sets that exist now, the world (0) first.
  std::vector<int32_t> process_set_ids() const;

  bool poll(Handle h) const { return handles_.poll(h); }
  // Waits up to `timeout` for synchronize() not to block (HandleTable::wait,
  // with the peer timeout as the grace after the loop ended).
  HandleTable::Waited wait(Handle h, std::chrono::nanoseconds timeout);
  // The failure synchronize() throws for a handle wait() found abandoned.
  RuntimeError abandoned(Handle h) const { return handles_.abandoned(h, peer_timeout_); }
  // Waits, releases the handle, and returns its result or throws RuntimeError.
  Result synchronize(Handle h);
  // synchronize() that asks `interrupted`, on this thread, every 50 ms while
  // the handle is pending; true gives up with a kShutdown RuntimeError and
  // leaves the handle pending. One SYNCHRONIZE range covers the whole wait.
  Result synchronize(Handle h, const std::function<bool()>& interrupted);
  // synchronize() without a waiting thread (HandleTable::take_then).
  void synchronize_then(Handle h, HandleTable::Continuation then) {
    handles_.take_then(h, std::move(then));
  }
  void release(Handle h) { handles_.release(h); }
  // A thread is about to wait for what it submitted: no more submissions are
  // coming from it, so the loop stops waiting out the burst gap for more to
  // fuse with them. wait() and synchronize() call it.
  void flush();

  // Stops the loop on every rank (see above), fails what is left, and
  // releases the communicator. Idempotent.
  void shutdown();
  // Empty while running; else why it stopped (shutdown, or the failure).
  std::string stopped_reason() const;

  // Rank 0 writes the timeline; other ranks accept and ignore the calls.
  // stop_timeline() returns once the file is complete and closed (the loop
  // lets go of it at the end of its cycle).
  void start_timeline(const std::string& path, bool mark_cycles = false);
  // A timeline opened by open_timeline(), e.g. before the runtime ran (rank
  // 0's start_timeline() before the first asynchronous call), which the
  // runtime now writes to.
  void start_timeline(std::shared_ptr<timeline::Timeline> timeline);
  void stop_timeline();
  // Creates (truncates) the file; throws the invalid-argument Failure of
  // timeline::Timeline when it cannot. `writer_timeout`: the peer timeout.
  static std::shared_ptr<timeline::Timeline> open_timeline(
      const std::string& path, bool mark_cycles, std::chrono::milliseconds writer_timeout);

  Stats stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    Request request;
    Handle handle;
  };
  // The loop's state for one process set of which this rank is a member
  // (the world is set 0). Each negotiates over its own communicator.
  struct ProcessSet {
    int32_t id = 0;
    std::vector<int> ranks;             // global ranks, ascending
    std::unique_ptr<Communicator> own;  // a set's communicator; null for the world
    Communicator* comm = nullptr;       // `own`, or the world's
    std::unique_ptr<Negotiator> negotiator;
    CacheCoordinator cache;
    StallInspector stall;                  // consulted on the set's rank 0 only
    std::vector<StalledName> stalled_out;  // its verdicts, for the next message
    std::vector<char> slots;               // negotiation exchange
    // `member`: this rank's index in the set.
    ProcessSet(size_t cache_capacity, const StallPolicy& policy, int32_t set_id, int member)
        : id(set_id), cache(cache_capacity, member), stall(policy, set_id, Clock::now()) {}
  };
  // A process-set change this rank asked for, and the handle add/remove wait on.
  struct PendingSetChange {
    SetChange change;
    Handle handle;
  };

  // What a cycle starts from: the requests and set changes submitted since
  // the last one, this rank's message, and the timeline of the cycle.
  struct CycleInput {
    RankMessage mine;
    std::vector<Pending> fresh;
    std::shared_ptr<timeline::Timeline> tl;
  };

  // The loop thread: one negotiation cycle after another, in these steps.
  void loop();
  // Waits for work or the cycle's end, holding back while a burst arrives.
  CycleInput wait_for_cycle(Clock::time_point next_cycle);
  // Queues new requests by process set; a set removed since fails them.
  void file_by_set(std::vector<Pending>& fresh);
  // Completes join() once every rank has joined (the world's negotiation).
  void complete_join_if_agreed(ProcessSet& world);
  // Negotiates and runs every set but the world, in the order of their ids.
  void run_other_sets(timeline::Timeline* tl);
  // Fails what is still waiting and ends the loop at a rank's shutdown.
  void shut_down(int stopper);
  Handle submit_set_change(SetChange change);
  // Applies the changes every rank has now asked for, in order (loop thread).
  void apply_set_changes(const std::vector<RankMessage>& world_messages);
  // Adds a set; returns its id, or throws RuntimeError (the same on every rank).
  int32_t create_process_set(const std::vector<int>& ranks);
  // Builds the set's communicator where this rank is a member (collective
  // over the members).
  void open_process_set(int32_t id, const std::vector<int>& ranks);
  void destroy_process_set(int32_t id);
  std::vector<Response> negotiate(ProcessSet& set, RankMessage& mine,
                                  std::vector<RankMessage>& messages, timeline::Timeline* tl);
  std::vector<RankMessage> exchange(ProcessSet& set, const RankMessage& mine);
  void run_responses(ProcessSet& set, const std::vector<Response>& responses,
                     timeline::Timeline* tl);
  void final_barrier();
  // `tl`: the timeline of the cycle (null: none), so that a span opened in a
  // cycle is closed in the same file.
  void execute(const Response& r, ProcessSet& set, timeline::Timeline* tl);
  void inspect_stalls(ProcessSet& set, const std::vector<RankMessage>& messages);
  // Fails on this rank what the set's rank 0 found stalled, and takes it out
  // of this cycle's messages and of the negotiation (the same on every member).
  void fail_stalled(ProcessSet& set, std::vector<RankMessage>& messages, timeline::Timeline* tl);
  // Its bit goes out no more (it ran or failed).
  void forget_cached(const Pending& p);
  // Run on `comm`: the world's communicator or a process set's.
  void run_allreduce(Communicator& comm, const Response& r, std::vector<Pending*>& items,
                     timeline::Timeline* tl);
  Result run_single(Communicator& comm, const Response& r, Pending& p, timeline::Timeline* tl);
  // A response whose tensors live on a CUDA device: queued on the device
  // here; its handles complete from the finalizer's thread.
  void start_on_device(Communicator& comm, const Response& r, std::vector<Pending*>& items);
  gpu::DeviceCollectives& device_collectives();  // made on first use
  // From the finalizer's thread: the loop stops with `failure` at its next turn.
  void report_device_failure(const common::Failure& failure);
  // Takes a reported name out of the loop's books (reported_, the cache's
  // bits, in_flight_) and returns its handle; nullopt if not reported here.
  std::optional<Handle> release_reported(const std::string& name);
  void count_run(const Response& r);
  void finish(const std::string& name, Result result);
  void fail(const std::string& name, common::Failure failure);
  void fail(const std::string& name, ErrorKind kind, const std::string& error) {
    fail(name, common::Failure(kind, rank_, -1, error));
  }
  void fail_everything(common::Failure failure);
  void fail_everything(ErrorKind kind, const std::string& error) {
    fail_everything(common::Failure(kind, rank_, -1, error));
  }

  std::unique_ptr<Communicator> comm_;
  const int rank_;
  const int size_;
  const int64_t fusion_threshold_;
  const std::chrono::nanoseconds cycle_time_;
  const size_t cache_capacity_;
  const StallPolicy stall_policy_;
  const std::chrono::milliseconds peer_timeout_;  // RINGLET_TIMEOUT_SECONDS
  const GpuOperations gpu_operations_;            // named when a device tensor is refused

  HandleTable handles_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::vector<Pending> queue_;                      // submitted, not yet reported
  std::vector<PendingSetChange> set_change_queue_;  // asked for, not yet sent
  std::unordered_set<std::string> in_flight_;       // names submitted and not completed
  ProcessSetTable set_table_;                       // every set that exists, members or not
  Clock::time_point last_enqueue_{};
  bool shutdown_requested_ = false;
  bool loop_idle_ = false;
  // A caller waits for a handle (wait(), synchronize()): its burst is over, and the
  // loop stops holding back the queue for more (flush()).
  bool flush_requested_ = false;
  bool join_requested_ = false;                   // join() until every rank joined
  Handle join_handle_ = 0;                        // the loop waits for work (wake it)
  std::map<int32_t, uint64_t> barrier_sequence_;  // per set
  std::map<int32_t, uint64_t> group_sequence_;    // per set
  std::string stopped_;                           // why the loop ended
  ErrorKind stopped_kind_ = ErrorKind::kShutdown;
  std::shared_ptr<timeline::Timeline> timeline_;
  Stats stats_;

  // Loop thread only.
  int32_t static_sets_ = 0;                              // ids 1..n, opened before the first cycle
  std::map<int32_t, std::unique_ptr<ProcessSet>> sets_;  // the sets this rank belongs to
  std::deque<PendingSetChange> sent_set_changes_;        // this rank's, sent, not yet applied
  std::map<int32_t, std::vector<Pending>> unreported_;   // per set: picked up, not yet reported
  bool join_sent_ = false;                               // this rank's join flag went out
  std::unordered_map<std::string, Pending> reported_;    // reported, awaiting a response
  std::vector<std::byte> prescale_buffer_;               // reducescatter: the prescaled input
  std::unique_ptr<gpu::DeviceCollectives> device_collectives_;  // see device_collectives()
  std::optional<common::Failure> device_failure_;  // mu_; the first a device collective met
  std::string pending_abort_;                      // stall shutdown to announce (world message)

  std::thread thread_;
};

}  // namespace ringlet::core::runtime
