#include "core/runtime/runtime.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>

#include "core/collectives/algorithm_table.h"
#include "core/collectives/collectives.h"
#include "core/gpu/device_collectives.h"
#include "core/nvtx/nvtx.h"
#include "core/runtime/negotiation.h"
#include "core/runtime/request_validation.h"
#include "core/timeline/timeline.h"
#include "ringlet/common/logging.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// After work wakes the loop, it waits while the caller keeps submitting
// (requests less than this apart), but never past one cycle.
constexpr auto kBurstGap = std::chrono::microseconds(15);

// What every request sets; each enqueue_* adds what its collective needs.
Request make_request(std::string name, CollectiveKind kind, DataType dtype,
                     std::vector<int64_t> shape, Device device, int32_t process_set) {
  Request r;
  r.meta.name = std::move(name);
  r.meta.kind = kind;
  r.meta.dtype = dtype;
  r.meta.shape = std::move(shape);
  r.meta.process_set = process_set;
  r.device = device;
  return r;
}

StallPolicy stall_policy_of(const Config& c) {
  return {std::chrono::seconds(c.stall_check_seconds),
          std::chrono::seconds(c.stall_shutdown_seconds),
          std::chrono::seconds(c.stall_timeout_seconds)};
}

}  // namespace

Runtime::Runtime(std::unique_ptr<Communicator> comm, std::vector<std::vector<int>> process_sets)
    : comm_(std::move(comm)),
      rank_(comm_->rank()),
      size_(comm_->size()),
      fusion_threshold_(comm_->config().fusion_threshold),
      cycle_time_(
          std::chrono::nanoseconds(static_cast<int64_t>(comm_->config().cycle_time_ms * 1e6))),
      cache_capacity_(static_cast<size_t>(std::max<int64_t>(0, comm_->config().cache_capacity))),
      stall_policy_(stall_policy_of(comm_->config())),
      peer_timeout_(comm_->config().timeout),
      gpu_operations_(comm_->config().gpu_operations),
      set_table_(size_, rank_) {
  auto world = std::make_unique<ProcessSet>(cache_capacity_, stall_policy_, 0, rank_);
  world->ranks = *set_table_.ranks(0);
  world->comm = comm_.get();
  world->negotiator = std::make_unique<Negotiator>(size_);
  sets_.emplace(0, std::move(world));
  // Known at once, so that collectives may name them as soon as this returns;
  // the loop builds their communicators before its first cycle.
  static_sets_ = static_cast<int32_t>(process_sets.size());
  set_table_.add_static(std::move(process_sets));
  // From here each rank has a second busy thread, this loop, beside the
  // application's: spinning that paid for one thread per core may not now.
  comm_->set_busy_threads_per_rank(2);
  nvtx::set_enabled(comm_->config().nvtx);
  if (!comm_->config().timeline.empty()) {
    try {
      start_timeline(comm_->config().timeline, comm_->config().timeline_mark_cycles);
    } catch (const common::Failure& f) {
      // The path came from the environment, not from a call.
      throw ConfigError(rank_, "HOROVOD_TIMELINE: " + f.cause());
    }
  }
  thread_ = std::thread([this] {
    loop();
    // What is still pending now never completes: synchronize() must not wait for it.
    handles_.close(stopped_reason());
  });
}

Runtime::~Runtime() { shutdown(); }

// ---------------------------------------------------------------- submission

Handle Runtime::enqueue_allreduce(std::string name, const void* input, void* output,
                                  std::vector<int64_t> shape, DataType dtype, ReduceOp op,
                                  double prescale, double postscale, Device device,
                                  int32_t process_set) {
  Request r = make_request(std::move(name), CollectiveKind::kAllreduce, dtype, std::move(shape),
                           device, process_set);
  r.meta.op = op;
  r.meta.prescale = prescale;
  r.meta.postscale = postscale;
  r.input = input;
  r.output = output;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_allgather(std::string name, const void* input, std::vector<int64_t> shape,
                                  DataType dtype, Device device, int32_t process_set) {
  Request r = make_request(std::move(name), CollectiveKind::kAllgather, dtype, std::move(shape),
                           device, process_set);
  r.input = input;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_broadcast(std::string name, void* buffer, std::vector<int64_t> shape,
                                  DataType dtype, int root, Device device, int32_t process_set) {
  Request r = make_request(std::move(name), CollectiveKind::kBroadcast, dtype, std::move(shape),
                           device, process_set);
  r.meta.root = root;
  r.input = buffer;
  r.output = buffer;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_reducescatter(std::string name, const void* input,
                                      std::vector<int64_t> shape, DataType dtype, ReduceOp op,
                                      double prescale, double postscale, Device device,
                                      int32_t process_set) {
  Request r = make_request(std::move(name), CollectiveKind::kReducescatter, dtype, std::move(shape),
                           device, process_set);
  r.meta.op = op;
  r.meta.prescale = prescale;
  r.meta.postscale = postscale;
  r.input = input;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_alltoall(std::string name, const void* input, std::vector<int64_t> shape,
                                 DataType dtype, std::vector<int64_t> splits, Device device,
                                 int32_t process_set) {
  Request r = make_request(std::move(name), CollectiveKind::kAlltoall, dtype, std::move(shape),
                           device, process_set);
  r.meta.splits = std::move(splits);
  r.input = input;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_send(std::string name, const void* input, std::vector<int64_t> shape,
                             DataType dtype, int to, Device device, int32_t process_set) {
  Request r = make_request(std::move(name), CollectiveKind::kSend, dtype, std::move(shape), device,
                           process_set);
  r.meta.root = rank_;
  r.meta.peer = to;
  r.input = input;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_recv(std::string name, void* output, std::vector<int64_t> shape,
                             DataType dtype, int from, Device device, int32_t process_set) {
  Request r = make_request(std::move(name), CollectiveKind::kRecv, dtype, std::move(shape), device,
                           process_set);
  r.meta.root = from;
  r.meta.peer = rank_;
  r.output = output;
  return enqueue(std::move(r));
}

std::vector<Handle> Runtime::enqueue_grouped_allreduce(std::vector<GroupMember> members,
                                                       DataType dtype, ReduceOp op, double prescale,
                                                       double postscale, Device device,
                                                       int32_t process_set) {
  uint64_t seq;
  {
    std::lock_guard lock(mu_);
    seq = group_sequence_[process_set]++;
  }
  // Numbered per set: a rank counts only the groups of the sets it is in.
  const std::string group =
      "ringlet.group." + std::to_string(process_set) + "." + std::to_string(seq);
  std::vector<Handle> handles;
  handles.reserve(members.size());
  // A member refused after others were queued would leave a group that can
  // never complete: check what differs per member before queueing any (what
  // they share, dtype and op, fails on the first member, before anything).
  {
    std::unordered_set<std::string> seen;
    std::lock_guard lock(mu_);
    for (const GroupMember& m : members) {
      auto bad = [&](const std::string& why) {
        return RuntimeError(ErrorKind::kInvalidArgument, rank_,
                            "grouped allreduce member '" + m.name + "': " + why);
      };
      if (m.name.empty()) throw bad("a collective needs a non-empty name");
      if (!seen.insert(m.name).second) throw bad("the name appears twice in the group");
      if (in_flight_.count(m.name))
        throw bad("a collective of this name is already in flight on this rank");
      int64_t n = 1;
      for (int64_t d : m.shape) {
        if (d < 0) throw bad("negative dimension in shape " + shape_string(m.shape));
        n *= d;
      }
      if (n > 0 && (!m.input || !m.output)) throw bad("null input or output buffer");
    }
  }
  for (GroupMember& m : members) {
    Request r = make_request(std::move(m.name), CollectiveKind::kAllreduce, dtype,
                             std::move(m.shape), device, process_set);
    r.meta.op = op;
    r.meta.prescale = prescale;
    r.meta.postscale = postscale;
    r.meta.group = group;
    r.meta.group_size = static_cast<int32_t>(members.size());
    r.input = m.input;
    r.output = m.output;
    handles.push_back(enqueue(std::move(r)));
  }
  return handles;
}

Handle Runtime::enqueue_barrier(int32_t process_set) {
  uint64_t seq;
  {
    std::lock_guard lock(mu_);
    seq = barrier_sequence_[process_set]++;
  }
  // A name is ready only once every rank submitted it: negotiating an empty
  // tensor is the barrier; nothing moves.
  const std::string name = process_set == 0 ? "ringlet.barrier." + std::to_string(seq)
                                            : "ringlet.barrier." + std::to_string(process_set) +
                                                  "." + std::to_string(seq);
  return enqueue_allreduce(name, nullptr, nullptr, {0}, DataType::kUInt8, ReduceOp::kMax, 1.0, 1.0,
                           {}, process_set);
}

void Runtime::barrier(int32_t process_set) {
  nvtx::Range range("BARRIER");
  synchronize(enqueue_barrier(process_set));
}

// The caller's time blocked on the others shows in Nsight beside its kernels.
HandleTable::Waited Runtime::wait(Handle h, std::chrono::nanoseconds timeout) {
  nvtx::Range range("WAIT");
  flush();
  return handles_.wait(h, timeout, peer_timeout_);
}

void Runtime::flush() {
  std::lock_guard lock(mu_);
  // An idle loop wakes on the next enqueue by itself; an empty queue holds
  // nothing back.
  if (queue_.empty() || loop_idle_ || flush_requested_) return;
  flush_requested_ = true;
  work_cv_.notify_one();
}

Result Runtime::synchronize(Handle h) {
  nvtx::Range range("SYNCHRONIZE");
  flush();
  return handles_.take(h, peer_timeout_);
}

Result Runtime::synchronize(Handle h, const std::function<bool()>& interrupted) {
  // How long `interrupted` waits to be asked: a binding's signal handlers
  // run within it.
  constexpr std::chrono::milliseconds kSlice{50};
  nvtx::Range range("SYNCHRONIZE");
  flush();
  while (handles_.wait(h, kSlice, peer_timeout_) == HandleTable::Waited::kTimedOut) {
    if (interrupted && interrupted()) {
      throw RuntimeError(ErrorKind::kShutdown, rank_,
                         "interrupted while waiting for handle " + std::to_string(h) +
                             ", which stays pending: synchronize it again");
    }
  }
  return handles_.take(h, peer_timeout_);
}

Handle Runtime::enqueue_join() {
  std::lock_guard lock(mu_);
  if (!stopped_.empty())
    throw RuntimeError(stopped_kind_, rank_, "join: the runtime has stopped: " + stopped_);
  if (join_requested_)
    throw RuntimeError(ErrorKind::kInvalidArgument, rank_, "join: this rank has joined already");
  join_requested_ = true;
  join_handle_ = handles_.create();
  if (loop_idle_) {
    loop_idle_ = false;
    work_cv_.notify_one();
  }
  return join_handle_;
}

int Runtime::join() {
  nvtx::Range range("JOIN");
  const Result r = synchronize(enqueue_join());
  int32_t last = -1;
  if (r.data.size() == sizeof last) std::memcpy(&last, r.data.data(), sizeof last);
  return last;
}

Handle Runtime::enqueue(Request r) {
  nvtx::Range range("ENQUEUE", 0, 1);
  validate_request(r, rank_, set_table_, gpu_operations_);
  // The collective waits, on the device, for the work that produced the
  // tensor so far on its stream; the caller's thread never waits for it.
  if (r.device.id >= 0) r.ready = gpu::record_ready(rank_, r.device.id, r.device.cuda_stream);
  const Metadata& m = r.meta;
  auto bad = [&](const std::string& why) { return request_error(r, rank_, why); };

  std::lock_guard lock(mu_);
  auto bad_as = [&](ErrorKind kind, const std::string& why) {
    RuntimeError e = bad(why);
    e.set_kind(kind);
    return e;
  };
  if (!stopped_.empty()) throw bad_as(stopped_kind_, "the runtime has stopped: " + stopped_);
  if (shutdown_requested_) throw bad_as(ErrorKind::kShutdown, "the runtime is shutting down");
  if (join_requested_)
    throw bad("this rank has joined; it may submit again once every rank has joined");
  if (!in_flight_.insert(m.name).second) {
    throw bad(
        "a collective of this name is already in flight on this rank; synchronize it before "
        "submitting the name again");
  }
  const Handle h = handles_.create();
  queue_.push_back({std::move(r), h});
  last_enqueue_ = Clock::now();
  // Wake the loop only where it sleeps waiting for work: during a burst it
  // polls last_enqueue_ on its own, and a wake-up per tensor would cost a
  // context switch per tensor.
  if (loop_idle_) {
    loop_idle_ = false;
    work_cv_.notify_one();
  }
  return h;
}

// ---------------------------------------------------------------- life cycle

void Runtime::shutdown() {
  nvtx::Range range("SHUTDOWN");
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) return;
    shutdown_requested_ = true;
  }
  work_cv_.notify_one();
  thread_.join();
  // Waits for the device collectives still running, whose completions use
  // the handles and the timeline.
  device_collectives_.reset();
  stop_timeline();
  sets_.clear();  // the sets' communicators borrow the world's links
  comm_.reset();
}

std::string Runtime::stopped_reason() const {
  std::lock_guard lock(mu_);
  return stopped_;
}

Stats Runtime::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::shared_ptr<timeline::Timeline> Runtime::open_timeline(
    const std::string& path, bool mark_cycles, std::chrono::milliseconds writer_timeout) {
  return std::make_shared<timeline::Timeline>(
      path, mark_cycles, writer_timeout,
      [](const std::string& error) { common::log(common::LogLevel::kError, "%s", error.c_str()); });
}

void Runtime::start_timeline(const std::string& path, bool mark_cycles) {
  if (rank_ != 0) return;
  start_timeline(open_timeline(path, mark_cycles, peer_timeout_));
}

void Runtime::start_timeline(std::shared_ptr<timeline::Timeline> timeline) {
  if (rank_ != 0 || !timeline) return;
  std::lock_guard lock(mu_);
  timeline_ = std::move(timeline);
}

void Runtime::stop_timeline() {
  std::shared_ptr<timeline::Timeline> old;
  {
    std::lock_guard lock(mu_);
    old.swap(timeline_);
  }
  if (!old) return;
  // The loop holds a reference until the end of its cycle; the last owner's
  // destructor writes what is queued and closes the file. Wait for that here
  // (bounded: a cycle that runs a long collective keeps it a while longer).
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (old.use_count() > 1 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  old.reset();
}

// ---------------------------------------------------------------- the loop

Runtime::CycleInput Runtime::wait_for_cycle(Clock::time_point next_cycle) {
  CycleInput in;
  std::unique_lock lock(mu_);
  loop_idle_ = true;
  work_cv_.wait_until(lock, next_cycle, [&] {
    return !queue_.empty() || !set_change_queue_.empty() || shutdown_requested_ ||
           device_failure_.has_value();
  });
  // A device collective failed on the finalizer's thread: the runtime
  // stops as it does for a collective that failed here.
  if (device_failure_) throw RuntimeError(*device_failure_);
  loop_idle_ = false;
  if (!queue_.empty() && !shutdown_requested_) {
    // Hold back while a burst is still arriving: only then can waiting
    // put more tensors into this cycle's fusion.
    const auto limit = Clock::now() + cycle_time_;
    while (!shutdown_requested_) {
      const auto now = Clock::now();
      const auto quiet_at = last_enqueue_ + kBurstGap;
      if (now >= quiet_at || now >= limit || flush_requested_) break;
      work_cv_.wait_until(lock, std::min(quiet_at, limit));
    }
  }
  in.fresh.swap(queue_);
  flush_requested_ = false;
  for (PendingSetChange& c : set_change_queue_) {
    in.mine.set_changes.push_back(c.change);
    sent_set_changes_.push_back(std::move(c));
  }
  set_change_queue_.clear();
  in.mine.shutdown = shutdown_requested_;
  in.mine.abort = pending_abort_;
  in.mine.join = join_requested_ && !join_sent_;
  join_sent_ |= in.mine.join;
  in.tl = timeline_;
  return in;
}

void Runtime::file_by_set(std::vector<Pending>& fresh) {
  for (Pending& p : fresh) {
    const int32_t id = p.request.meta.process_set;
    if (sets_.count(id)) {
      unreported_[id].push_back(std::move(p));
      continue;
    }
    {
      std::lock_guard lock(mu_);
      in_flight_.erase(p.request.meta.name);
    }
    handles_.fail(p.handle,
                  common::Failure(ErrorKind::kInvalidArgument, rank_, -1,
                                  "process set " + std::to_string(id) + " was removed before '" +
                                      p.request.meta.name + "' ran"));
  }
}

void Runtime::complete_join_if_agreed(ProcessSet& world) {
  const std::optional<int32_t> last = world.negotiator->take_join_result();
  if (!last) return;
  Handle h;
  {
    std::lock_guard lock(mu_);
    join_requested_ = false;
    h = join_handle_;
  }
  join_sent_ = false;
  Result r;
  const int32_t v = *last;
  r.data.resize(sizeof v);
  std::memcpy(r.data.data(), &v, sizeof v);
  handles_.complete(h, std::move(r));
}

void Runtime::run_other_sets(timeline::Timeline* tl) {
  for (auto& [id, set] : sets_) {
    if (id == 0) continue;
    RankMessage set_mine;
    std::vector<RankMessage> set_messages;
    const std::vector<Response> set_responses = negotiate(*set, set_mine, set_messages, tl);
    run_responses(*set, set_responses, tl);
    if (set->comm->rank() == 0) inspect_stalls(*set, set_messages);
  }
}

void Runtime::shut_down(int stopper) {
  const std::string why =
      "ringlet was shut down (requested by rank " + std::to_string(stopper) + ")";
  for (auto& [id, set] : sets_) {
    for (const auto& [name, missing] : set->negotiator->waiting()) {
      if (reported_.count(name)) {
        fail(name, ErrorKind::kShutdown,
             why + " before '" + name + "' was submitted on every rank (missing on " +
                 ranks_text(missing) + ")");
      }
    }
  }
  fail_everything(ErrorKind::kShutdown, why);
  final_barrier();
}

void Runtime::loop() {
  // The loop's timed waits are microseconds long (the burst gap); Linux's
  // default 50 us timer slack would stretch each of them several-fold.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  auto next_cycle = Clock::now();
  try {
    for (int32_t id = 1; id <= static_sets_; ++id) open_process_set(id, *set_table_.ranks(id));
    while (true) {
      CycleInput in = wait_for_cycle(next_cycle);
      next_cycle = Clock::now() + cycle_time_;
      timeline::Timeline* tl = in.tl.get();
      if (tl) tl->cycle_start();
      file_by_set(in.fresh);

      // The world first: it carries shutdown, stall aborts, join and the
      // process-set changes, which every rank applies at the same cycle.
      ProcessSet& world = *sets_.at(0);
      std::vector<RankMessage> messages;
      const std::vector<Response> responses = negotiate(world, in.mine, messages, tl);
      for (const RankMessage& m : messages) {
        if (!m.abort.empty()) {
          fail_everything(ErrorKind::kStalled, m.abort);
          final_barrier();
          return;
        }
      }
      int stopper = -1;
      for (int r = 0; r < size_ && stopper < 0; ++r) {
        if (messages[r].shutdown) stopper = r;
      }
      {
        std::lock_guard lock(mu_);
        ++stats_.cycles;
      }
      run_responses(world, responses, tl);
      complete_join_if_agreed(world);
      if (rank_ == 0) inspect_stalls(world, messages);
      if (stopper >= 0) {
        shut_down(stopper);
        return;
      }
      apply_set_changes(messages);
      // Then every other set this rank is in, in the order of their ids
      // (the same on every member, so their exchanges cannot cross).
      run_other_sets(tl);
    }
  } catch (const std::exception& e) {
    const common::Failure failure = failure_from(e, rank_);
    // What the device still runs ends now, not at its deadline: an elastic
    // job re-forms at once (NCCL aborted, waiting kernels told to leave).
    if (device_collectives_) device_collectives_->abandon(failure);
    fail_everything(failure);
  }
}

void Runtime::run_responses(ProcessSet& set, const std::vector<Response>& responses,
                            timeline::Timeline* tl) {
  if (tl) {
    for (const Response& resp : responses) {
      for (const std::string& name : resp.names) {
        tl->negotiate_end(name);
        tl->op_start(name, std::string(to_upper_string(resp.kind)), resp.bytes);
        tl->activity_start(name, "QUEUE");
      }
    }
  }
  for (const Response& resp : responses) execute(resp, set, tl);
}

// Every rank leaves the loop after the same exchange. A last barrier keeps a
// fast rank from closing its links (at shutdown) while a slow one still
// receives that exchange; an error here (a peer already gone) changes nothing
// any more.
void Runtime::final_barrier() {
  try {
    core::barrier(*comm_);
  } catch (const std::exception&) {
  }
}

}  // namespace ringlet::core::runtime
