#include "core/runtime/runtime.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>

#include "core/collectives/algorithm_table.h"
#include "core/collectives/collectives.h"
#include "core/nvtx/nvtx.h"
#include "core/runtime/negotiation.h"
#include "core/runtime/response_cache.h"
#include "core/timeline/timeline.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// Negotiation slot per rank: a 4-byte length and, when it fits, the message.
// Most cycles carry a few names or none, so one fixed-size allgather does;
// a longer message costs a second, variable-size allgather.
constexpr size_t kSlotBytes = 1024;
constexpr size_t kSlotPayload = kSlotBytes - sizeof(uint32_t);

// After work wakes the loop, it waits while the caller keeps submitting
// (requests less than this apart), but never past one cycle.
constexpr auto kBurstGap = std::chrono::microseconds(15);

// "[0, 2, 3]"
std::string set_text(const std::vector<int>& ranks) {
  return shape_string(std::vector<int64_t>(ranks.begin(), ranks.end()));
}

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

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
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
      gpu_operations_(comm_->config().gpu_operations) {
  std::vector<int> everyone(size_);
  std::iota(everyone.begin(), everyone.end(), 0);
  auto world = std::make_unique<ProcessSet>(cache_capacity_);
  world->ranks = everyone;
  world->comm = comm_.get();
  world->negotiator = std::make_unique<Negotiator>(size_);
  sets_.emplace(0, std::move(world));
  set_ranks_.emplace(0, std::move(everyone));
  set_change_inbox_.resize(size_);
  for (size_t i = 0; i < process_sets.size(); ++i) {
    std::vector<int> ranks =
        checked_set_ranks(std::move(process_sets[i]), "process set " + std::to_string(i + 1));
    for (size_t k = 0; k < static_sets_.size(); ++k) {
      if (static_sets_[k] == ranks) {
        throw RuntimeError(ErrorKind::kInvalidArgument,
                           "rank " + std::to_string(rank_) + ": process sets " +
                               std::to_string(k + 1) + " and " + std::to_string(i + 1) +
                               " both hold ranks " + set_text(ranks));
      }
    }
    static_sets_.push_back(std::move(ranks));
  }
  // Known at once, so that collectives may name them as soon as this returns;
  // the loop builds their communicators before its first cycle.
  for (const std::vector<int>& ranks : static_sets_) set_ranks_.emplace(next_set_id_++, ranks);
  // From here each rank has a second busy thread, this loop, beside the
  // application's: spinning that paid for one thread per core may not now.
  comm_->set_busy_threads_per_rank(2);
  nvtx::set_enabled(comm_->config().nvtx);
  if (!comm_->config().timeline.empty()) {
    start_timeline(comm_->config().timeline, comm_->config().timeline_mark_cycles);
  }
  thread_ = std::thread([this] { loop(); });
}

Runtime::~Runtime() { shutdown(); }

// ---------------------------------------------------------------- process sets

std::vector<int> Runtime::checked_set_ranks(std::vector<int> ranks, const std::string& call) const {
  auto bad = [&](const std::string& why) {
    return RuntimeError(ErrorKind::kInvalidArgument,
                        "rank " + std::to_string(rank_) + ": " + call + ": " + why);
  };
  if (ranks.empty()) throw bad("a process set needs at least one rank");
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size_) {
      throw bad("rank " + std::to_string(ranks[i]) + " is not a rank of the " +
                std::to_string(size_) + "-rank job");
    }
    if (i > 0 && ranks[i] == ranks[i - 1])
      throw bad("rank " + std::to_string(ranks[i]) + " is listed twice");
  }
  return ranks;
}

Handle Runtime::submit_set_change(SetChange change) {
  std::lock_guard lock(mu_);
  const std::string me = "rank " + std::to_string(rank_) + ": ";
  if (!stopped_.empty())
    throw RuntimeError(stopped_kind_, me + "the runtime has stopped: " + stopped_);
  if (shutdown_requested_)
    throw RuntimeError(ErrorKind::kShutdown, me + "the runtime is shutting down");
  if (join_requested_) {
    throw RuntimeError(
        ErrorKind::kInvalidArgument,
        me + "this rank has joined; process sets cannot change until every rank has");
  }
  const Handle h = handles_.create();
  set_change_queue_.push_back({std::move(change), h});
  if (loop_idle_) {
    loop_idle_ = false;
    work_cv_.notify_one();
  }
  return h;
}

int32_t Runtime::add_process_set(std::vector<int> ranks) {
  nvtx::Range range("ADD_PROCESS_SET");
  SetChange change;
  for (int r : checked_set_ranks(std::move(ranks), "add_process_set")) change.ranks.push_back(r);
  const Result r = synchronize(submit_set_change(std::move(change)));
  int32_t id = -1;
  if (r.data.size() == sizeof id) std::memcpy(&id, r.data.data(), sizeof id);
  return id;
}

void Runtime::remove_process_set(int32_t id) {
  nvtx::Range range("REMOVE_PROCESS_SET");
  if (id == 0) {
    throw RuntimeError(
        ErrorKind::kInvalidArgument,
        "rank " + std::to_string(rank_) +
            ": remove_process_set: process set 0 is the world; it cannot be removed");
  }
  process_set_ranks(id);  // unknown ids fail here, before the others are involved
  SetChange change;
  change.remove_id = id;
  synchronize(submit_set_change(std::move(change)));
}

std::vector<int> Runtime::process_set_ranks(int32_t id) const {
  std::lock_guard lock(mu_);
  auto it = set_ranks_.find(id);
  if (it == set_ranks_.end()) {
    throw RuntimeError(
        ErrorKind::kInvalidArgument,
        "rank " + std::to_string(rank_) + ": there is no process set " + std::to_string(id));
  }
  return it->second;
}

std::vector<int32_t> Runtime::process_set_ids() const {
  std::lock_guard lock(mu_);
  std::vector<int32_t> ids;
  for (const auto& [id, ranks] : set_ranks_) ids.push_back(id);
  return ids;
}

int32_t Runtime::create_process_set(const std::vector<int>& ranks) {
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, existing] : set_ranks_) {
      if (existing == ranks) {
        throw RuntimeError(
            ErrorKind::kInvalidArgument,
            "process set " + std::to_string(id) + " already holds ranks " + set_text(ranks));
      }
    }
  }
  const int32_t id = next_set_id_++;
  open_process_set(id, ranks);
  std::lock_guard lock(mu_);
  set_ranks_.emplace(id, ranks);
  return id;
}

void Runtime::open_process_set(int32_t id, const std::vector<int>& ranks) {
  if (std::binary_search(ranks.begin(), ranks.end(), rank_)) {
    auto set = std::make_unique<ProcessSet>(cache_capacity_);
    set->id = id;
    set->ranks = ranks;
    set->own = Communicator::create_subset(*comm_, ranks, "ps" + std::to_string(id));
    set->comm = set->own.get();
    set->negotiator = std::make_unique<Negotiator>(static_cast<int>(ranks.size()), ranks);
    sets_.emplace(id, std::move(set));
  }
}

void Runtime::destroy_process_set(int32_t id) {
  auto it = sets_.find(id);
  if (it != sets_.end()) {
    // What was submitted on the set and has not run fails; then the members
    // meet once more, so that none closes its window while another still
    // reads it for the set's last collective. Requests picked up this cycle
    // were not reported yet: they fail alike.
    if (auto fresh = unreported_.find(id); fresh != unreported_.end()) {
      for (Pending& p : fresh->second) reported_.emplace(p.request.meta.name, std::move(p));
      unreported_.erase(fresh);
    }
    std::vector<std::string> names;
    for (const auto& [name, p] : reported_) {
      if (p.request.meta.process_set == id) names.push_back(name);
    }
    for (const std::string& name : names) {
      fail(name, ErrorKind::kShutdown,
           "process set " + std::to_string(id) + " was removed before '" + name +
               "' ran on every member");
    }
    core::barrier(*it->second->comm);
    sets_.erase(it);
  }
  std::lock_guard lock(mu_);
  set_ranks_.erase(id);
}

// Every rank sees the same messages, so every rank applies the same changes
// at the same cycle, in the order each rank asked for them.
void Runtime::apply_set_changes(const std::vector<RankMessage>& world_messages) {
  for (int r = 0; r < size_; ++r) {
    for (const SetChange& c : world_messages[r].set_changes) set_change_inbox_[r].push_back(c);
  }
  while (std::all_of(set_change_inbox_.begin(), set_change_inbox_.end(),
                     [](const auto& q) { return !q.empty(); })) {
    std::vector<SetChange> asked(size_);
    for (int r = 0; r < size_; ++r) {
      asked[r] = std::move(set_change_inbox_[r].front());
      set_change_inbox_[r].pop_front();
    }
    PendingSetChange mine = std::move(sent_set_changes_.front());
    sent_set_changes_.pop_front();
    auto text = [](const SetChange& c) {
      return c.remove_id >= 0 ? "remove_process_set(" + std::to_string(c.remove_id) + ")"
                              : "add_process_set(" + set_text(c.ranks) + ")";
    };
    std::string error;
    ErrorKind kind = ErrorKind::kMismatch;
    for (int r = 1; r < size_ && error.empty(); ++r) {
      if (!(asked[r] == asked[0])) {
        error = "Mismatched process set changes: rank 0 called " + text(asked[0]) + ", rank " +
                std::to_string(r) + " called " + text(asked[r]) +
                " (every rank must make the same calls in the same order)";
      }
    }
    Result result;
    if (error.empty()) {
      try {
        int32_t id = asked[0].remove_id;
        if (id >= 0) {
          bool known;
          {
            std::lock_guard lock(mu_);
            known = set_ranks_.count(id) > 0;
          }
          if (!known) {
            throw RuntimeError(
                ErrorKind::kInvalidArgument,
                "there is no process set " + std::to_string(id) + " (removed already?)");
          }
          destroy_process_set(id);
        } else {
          id = create_process_set({asked[0].ranks.begin(), asked[0].ranks.end()});
        }
        result.data.resize(sizeof id);
        std::memcpy(result.data.data(), &id, sizeof id);
      } catch (const std::exception& e) {
        // A refused change fails only its handles; a failure while meeting
        // the members (a lost peer) ends the runtime.
        kind = kind_of(e);
        if (kind != ErrorKind::kInvalidArgument) {
          handles_.fail(
              mine.handle, kind,
              "rank " + std::to_string(rank_) + ": " + text(mine.change) + ": " + e.what());
          throw;
        }
        error = e.what();
      }
    }
    if (error.empty()) {
      handles_.complete(mine.handle, std::move(result));
    } else {
      handles_.fail(mine.handle, kind,
                    "rank " + std::to_string(rank_) + ": " + text(mine.change) + ": " + error);
    }
  }
}

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
        return RuntimeError(ErrorKind::kInvalidArgument, "rank " + std::to_string(rank_) +
                                                             ": grouped allreduce member '" +
                                                             m.name + "': " + why);
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
bool Runtime::wait(Handle h, std::chrono::nanoseconds timeout) const {
  nvtx::Range range("WAIT");
  return handles_.wait(h, timeout);
}

Result Runtime::synchronize(Handle h) {
  nvtx::Range range("SYNCHRONIZE");
  return handles_.take(h);
}

Handle Runtime::enqueue_join() {
  std::lock_guard lock(mu_);
  const std::string me = "rank " + std::to_string(rank_) + ": join: ";
  if (!stopped_.empty())
    throw RuntimeError(stopped_kind_, me + "the runtime has stopped: " + stopped_);
  if (join_requested_)
    throw RuntimeError(ErrorKind::kInvalidArgument, me + "this rank has joined already");
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
  Metadata& m = r.meta;
  const std::string kind(to_string(m.kind));
  nvtx::Range range("ENQUEUE", 0, 1);
  auto bad = [&](const std::string& why) {
    return RuntimeError(ErrorKind::kInvalidArgument, "rank " + std::to_string(rank_) + ": " + kind +
                                                         " '" + m.name + "': " + why);
  };
  if (m.name.empty()) throw bad("a collective needs a non-empty name");
  if (!is_valid(m.dtype)) throw bad("invalid dtype " + std::to_string(static_cast<int>(m.dtype)));
  if (!is_valid(m.op)) throw bad("invalid reduce op " + std::to_string(static_cast<int>(m.op)));
  for (int64_t d : m.shape) {
    if (d < 0) throw bad("negative dimension in shape " + shape_string(m.shape));
  }
  if (r.device.id >= 0) throw bad(device_tensor_refusal(gpu_operations_, r.device.id));
  // A set's members size the split collectives and hold the root. The world
  // (most calls) needs no lookup: no lock and no copy per submission.
  std::vector<int> members;
  if (m.process_set != 0) {
    {
      std::lock_guard lock(mu_);
      auto it = set_ranks_.find(m.process_set);
      if (it == set_ranks_.end())
        throw bad("there is no process set " + std::to_string(m.process_set));
      members = it->second;
    }
    if (!std::binary_search(members.begin(), members.end(), rank_)) {
      throw bad("rank " + std::to_string(rank_) + " is not a member of process set " +
                std::to_string(m.process_set) + " (ranks " + set_text(members) + ")");
    }
  }
  auto is_member = [&](int r) {
    return m.process_set == 0 ? r >= 0 && r < size_
                              : std::binary_search(members.begin(), members.end(), r);
  };
  const int set_size = m.process_set == 0 ? size_ : static_cast<int>(members.size());
  const std::string in_set =
      m.process_set == 0 ? "" : " of process set " + std::to_string(m.process_set);
  m.device = r.device.id;
  const int64_t n = m.elements();
  switch (m.kind) {
    case CollectiveKind::kAllreduce:
      if (n > 0 && (!r.input || !r.output)) throw bad("null input or output buffer");
      break;
    case CollectiveKind::kBroadcast:
      if (!is_member(m.root)) {
        throw bad("root " + std::to_string(m.root) + " is not a rank" + in_set + " (ranks " +
                  (m.process_set == 0 ? "0.." + std::to_string(size_ - 1) : set_text(members)) +
                  ")");
      }
      if (n > 0 && !r.output) throw bad("null buffer");
      break;
    case CollectiveKind::kAllgather:
    case CollectiveKind::kReducescatter:
    case CollectiveKind::kAlltoall:
      if (m.shape.empty()) throw bad("needs a tensor of at least one dimension");
      if (n > 0 && !r.input) throw bad("null input buffer");
      break;
  }
  if (m.kind == CollectiveKind::kAlltoall) {
    if (m.splits.empty()) {
      if (m.shape[0] % set_size != 0) {
        throw bad("first dimension " + std::to_string(m.shape[0]) + " does not split evenly over " +
                  std::to_string(set_size) + " ranks" + in_set + "; give splits");
      }
      m.splits.assign(set_size, m.shape[0] / set_size);
    }
    if (static_cast<int>(m.splits.size()) != set_size) {
      throw bad("splits has " + std::to_string(m.splits.size()) + " entries for " +
                std::to_string(set_size) + " ranks" + in_set);
    }
    int64_t sum = 0;
    for (int64_t s : m.splits) {
      if (s < 0) throw bad("negative split in " + shape_string(m.splits));
      sum += s;
    }
    if (sum != m.shape[0]) {
      throw bad("splits " + shape_string(m.splits) + " add up to " + std::to_string(sum) +
                ", not the first dimension " + std::to_string(m.shape[0]));
    }
  }

  std::lock_guard lock(mu_);
  if (!stopped_.empty()) {
    throw RuntimeError(stopped_kind_, bad("the runtime has stopped: " + stopped_).what());
  }
  if (shutdown_requested_)
    throw RuntimeError(ErrorKind::kShutdown, bad("the runtime is shutting down").what());
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

void Runtime::start_timeline(const std::string& path, bool mark_cycles) {
  if (rank_ != 0) return;
  auto tl = std::make_shared<timeline::Timeline>(path, mark_cycles);
  std::lock_guard lock(mu_);
  timeline_ = std::move(tl);
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

void Runtime::loop() {
  // The loop's timed waits are microseconds long (the burst gap); Linux's
  // default 50 us timer slack would stretch each of them several-fold.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  auto next_cycle = Clock::now();
  try {
    for (size_t i = 0; i < static_sets_.size(); ++i)
      open_process_set(static_cast<int32_t>(i + 1), static_sets_[i]);
    while (true) {
      RankMessage mine;
      std::vector<Pending> fresh;
      std::shared_ptr<timeline::Timeline> tl;
      {
        std::unique_lock lock(mu_);
        loop_idle_ = true;
        work_cv_.wait_until(lock, next_cycle, [&] {
          return !queue_.empty() || !set_change_queue_.empty() || shutdown_requested_;
        });
        loop_idle_ = false;
        if (!queue_.empty() && !shutdown_requested_) {
          // Hold back while a burst is still arriving: only then can waiting
          // put more tensors into this cycle's fusion.
          const auto limit = Clock::now() + cycle_time_;
          while (!shutdown_requested_) {
            const auto now = Clock::now();
            const auto quiet_at = last_enqueue_ + kBurstGap;
            if (now >= quiet_at || now >= limit) break;
            work_cv_.wait_until(lock, std::min(quiet_at, limit));
          }
        }
        fresh.swap(queue_);
        for (PendingSetChange& c : set_change_queue_) {
          mine.set_changes.push_back(c.change);
          sent_set_changes_.push_back(std::move(c));
        }
        set_change_queue_.clear();
        mine.shutdown = shutdown_requested_;
        mine.abort = pending_abort_;
        mine.join = join_requested_ && !join_sent_;
        join_sent_ |= mine.join;
        tl = timeline_;
      }
      next_cycle = Clock::now() + cycle_time_;
      if (tl) tl->cycle_start();

      // New requests by set; a set removed since they were submitted fails them.
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
        handles_.fail(p.handle, ErrorKind::kInvalidArgument,
                      "rank " + std::to_string(rank_) + ": process set " + std::to_string(id) +
                          " was removed before '" + p.request.meta.name + "' ran");
      }

      // The world first: it carries shutdown, stall aborts, join and the
      // process-set changes, which every rank applies at the same cycle.
      ProcessSet& world = *sets_.at(0);
      std::vector<RankMessage> messages;
      const std::vector<Response> responses = negotiate(world, mine, messages, tl.get());
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
      run_responses(world, responses, tl.get());
      if (auto last = world.negotiator->take_join_result()) {
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
      if (rank_ == 0) inspect_stalls(world, messages);

      if (stopper < 0) {
        apply_set_changes(messages);
        // Then every other set this rank is in, in the order of their ids
        // (the same on every member, so their exchanges cannot cross).
        for (auto& [id, set] : sets_) {
          if (id == 0) continue;
          RankMessage set_mine;
          std::vector<RankMessage> set_messages;
          const std::vector<Response> set_responses =
              negotiate(*set, set_mine, set_messages, tl.get());
          run_responses(*set, set_responses, tl.get());
          if (set->comm->rank() == 0) inspect_stalls(*set, set_messages);
        }
        continue;
      }

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
      return;
    }
  } catch (const std::exception& e) {
    fail_everything(kind_of(e), e.what());
  }
}

// Reports the set's new requests (in full, or as response-cache
// bits), exchanges with the set's members, and returns what runs now, the
// same on every member. `messages` receives every member's message.
std::vector<Response> Runtime::negotiate(ProcessSet& set, RankMessage& mine,
                                         std::vector<RankMessage>& messages,
                                         timeline::Timeline* tl) {
  std::vector<Pending> fresh;
  if (auto it = unreported_.find(set.id); it != unreported_.end()) {
    fresh = std::move(it->second);
    unreported_.erase(it);
  }
  for (Pending& p : fresh) {
    const Metadata& md = p.request.meta;
    if (set.cache.enabled() && cacheable(md) && set.cache.find(md)) {
      cached_pending_.insert(md.name);  // reported by bit below
    } else {
      if (auto slot = set.cache.slot_of(md.name))
        mine.invalidate.push_back(*slot);  // changed since cached
      mine.ready.push_back(md);
    }
    std::string name = md.name;
    reported_.emplace(std::move(name), std::move(p));
  }
  set_cached_bits(set, mine);
  std::optional<nvtx::Range> range;
  if (!mine.ready.empty() || !mine.cached_bits.empty()) {
    range.emplace("NEGOTIATE", 0, static_cast<int64_t>(mine.ready.size()));
  }
  try {
    messages = exchange(set, mine);
  } catch (const std::exception& e) {
    throw RuntimeError(kind_of(e), std::string("negotiation failed: ") + e.what());
  }
  const int n = static_cast<int>(set.ranks.size());
  if (tl) {
    // A span opens when the first rank reports the name; each rank leaves a
    // mark when it reports.
    std::unordered_set<std::string> opened;
    for (int r = 0; r < n; ++r) {
      for (const Metadata& m : messages[r].ready) {
        if (!opened.count(m.name) && set.negotiator->reported_by(m.name).empty()) {
          tl->negotiate_start(m.name, std::string(to_upper_string(m.kind)));
          opened.insert(m.name);
        }
        tl->rank_ready(m.name, set.ranks[r]);
      }
    }
  }
  std::vector<Response> responses =
      set.negotiator->add_cycle(messages, fusion_threshold_, cached_responses(set, messages));
  // Every member updates its cache from the same responses, in order.
  for (const Response& resp : responses) {
    if (!resp.error.empty() || resp.group) continue;
    for (const Metadata& m : resp.meta) {
      if (cacheable(m)) set.cache.put(m);
    }
  }
  return responses;
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

// Bits for every request this rank reported through the cache and that has
// not run yet (Horovod resends them each cycle too); a request whose slot was
// erased or evicted since goes out in full instead.
void Runtime::set_cached_bits(ProcessSet& set, RankMessage& mine) {
  if (cached_pending_.empty()) return;
  std::vector<uint8_t> bits((set.cache.span() + 7) / 8, 0);
  bool any = false;
  std::erase_if(cached_pending_, [&](const std::string& name) {
    auto it = reported_.find(name);
    if (it == reported_.end()) return true;  // failed with the runtime
    if (it->second.request.meta.process_set != set.id) return false;
    const auto slot = set.cache.find(it->second.request.meta);
    if (!slot) {
      mine.ready.push_back(it->second.request.meta);
      return true;
    }
    bits[*slot / 8] |= static_cast<uint8_t>(1u << (*slot % 8));
    any = true;
    return false;
  });
  if (any) mine.cached_bits = std::move(bits);
}

// Applies the cycle's erasures, then answers the slots whose bit every rank
// set (the bit-vector AND), in slot order.
std::vector<Response> Runtime::cached_responses(ProcessSet& set,
                                                const std::vector<RankMessage>& messages) {
  std::vector<Response> out;
  if (!set.cache.enabled()) return out;
  for (const RankMessage& m : messages) {
    for (uint32_t slot : m.invalidate) set.cache.erase(slot);
  }
  // Joined ranks count as having set every bit.
  std::vector<const RankMessage*> active;
  for (int r = 0; r < static_cast<int>(messages.size()); ++r) {
    if (!set.negotiator->joined(r) && !messages[r].join) active.push_back(&messages[r]);
  }
  if (active.empty()) return out;
  size_t len = SIZE_MAX;
  for (const RankMessage* m : active) len = std::min(len, m->cached_bits.size());
  for (size_t i = 0; i < len; ++i) {
    uint8_t all = 0xff;
    for (const RankMessage* m : active) all &= m->cached_bits[i];
    for (int b = 0; b < 8 && all; ++b) {
      if (!(all & (1u << b))) continue;
      const Metadata* md = set.cache.at(static_cast<uint32_t>(i * 8 + b));
      if (!md) continue;
      Response r;
      r.kind = md->kind;
      r.names = {md->name};
      r.meta = {*md};
      r.bytes = md->elements() * static_cast<int64_t>(dtype_size(md->dtype));
      out.push_back(std::move(r));
    }
  }
  if (!out.empty()) {
    std::lock_guard lock(mu_);
    stats_.cached_tensors += out.size();
  }
  return out;
}

// The set's rank 0 only: every negotiator of the set holds the same table, so
// one rank can judge it; the decision to stop travels to every rank in this
// rank's next world message.
void Runtime::inspect_stalls(ProcessSet& set, const std::vector<RankMessage>& messages) {
  const Config& c = comm_->config();
  if (c.stall_check_seconds <= 0 && c.stall_shutdown_seconds <= 0) return;
  const auto now = Clock::now();
  for (const RankMessage& m : messages) {
    for (const Metadata& md : m.ready) set.first_seen.try_emplace(md.name, now);
  }
  auto waiting = set.negotiator->waiting();
  // Names reported through the response cache wait as bits: set by some
  // ranks, not all (joined ranks count as set).
  size_t longest = 0;
  for (const RankMessage& m : messages) longest = std::max(longest, m.cached_bits.size());
  for (size_t slot = 0; slot < longest * 8; ++slot) {
    std::vector<int> missing;
    bool some = false;
    for (int r = 0; r < static_cast<int>(messages.size()); ++r) {
      const auto& bits = messages[r].cached_bits;
      const bool bit = slot / 8 < bits.size() && (bits[slot / 8] >> (slot % 8)) & 1;
      some |= bit;
      if (!bit && !set.negotiator->joined(r)) missing.push_back(set.ranks[r]);
    }
    const Metadata* md = set.cache.at(static_cast<uint32_t>(slot));
    if (!some || missing.empty() || !md) continue;
    set.first_seen.try_emplace(md->name, now);
    waiting[md->name] = std::move(missing);
  }
  std::erase_if(set.first_seen, [&](const auto& kv) { return !waiting.count(kv.first); });
  if (waiting.empty()) return;
  auto stalled_text = [&](std::chrono::seconds older_than, bool& any) {
    // Per missing rank, the names it has not submitted.
    std::map<int, std::vector<std::string>> by_rank;
    for (const auto& [name, missing] : waiting) {
      auto it = set.first_seen.find(name);
      if (it == set.first_seen.end() || now - it->second < older_than) continue;
      for (int r : missing) by_rank[r].push_back(name);
    }
    any = !by_rank.empty();
    std::string text;
    for (const auto& [r, names] : by_rank)
      text += "; rank " + std::to_string(r) + " has not submitted " + names_text(names);
    return text;
  };
  const std::string where = set.id == 0 ? "" : " in process set " + std::to_string(set.id);
  if (c.stall_check_seconds > 0 &&
      now - set.last_stall_check >= std::chrono::seconds(c.stall_check_seconds)) {
    set.last_stall_check = now;
    bool any = false;
    const std::string text = where + stalled_text(std::chrono::seconds(c.stall_check_seconds), any);
    if (any) {
      std::fprintf(
          stderr,
          "ringlet: stall warning: tensors submitted by some ranks have waited more than %d s for "
          "the "
          "others (ranks submitting different names, or only some ranks submitting, deadlock "
          "training)%s\n",
          c.stall_check_seconds, text.c_str());
      std::lock_guard lock(mu_);
      ++stats_.stall_warnings;
    }
  }
  if (c.stall_shutdown_seconds > 0 && pending_abort_.empty()) {
    bool any = false;
    const std::string text =
        where + stalled_text(std::chrono::seconds(c.stall_shutdown_seconds), any);
    if (any) {
      pending_abort_ = "ringlet: stall shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" +
                       std::to_string(c.stall_shutdown_seconds) +
                       "): tensors waited longer than that" + text;
      work_cv_.notify_one();
    }
  }
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

std::vector<RankMessage> Runtime::exchange(ProcessSet& set, const RankMessage& mine) {
  Communicator& comm = *set.comm;
  const int size = comm.size();
  std::vector<char>& slots = set.slots;
  const bool empty = mine.ready.empty() && !mine.shutdown && !mine.join && mine.abort.empty() &&
                     mine.cached_bits.empty() && mine.invalidate.empty() &&
                     mine.set_changes.empty();
  const std::string bytes = empty ? std::string() : encode(mine);
  slots.assign(kSlotBytes * size, 0);
  char* own = slots.data() + kSlotBytes * comm.rank();
  const uint32_t len = static_cast<uint32_t>(bytes.size());
  std::memcpy(own, &len, sizeof len);
  if (len <= kSlotPayload) std::memcpy(own + sizeof len, bytes.data(), len);
  const std::vector<size_t> slot_counts(size, kSlotBytes);
  core::allgather(comm, own, slots.data(), slot_counts, DataType::kUInt8);

  std::vector<size_t> lens(size);
  bool overflow = false;
  for (int r = 0; r < size; ++r) {
    uint32_t l;
    std::memcpy(&l, slots.data() + kSlotBytes * r, sizeof l);
    lens[r] = l;
    overflow |= l > kSlotPayload;
  }
  std::vector<RankMessage> out(size);
  if (!overflow) {
    for (int r = 0; r < size; ++r) {
      out[r] = decode(std::string_view(slots.data() + kSlotBytes * r + sizeof(uint32_t), lens[r]));
    }
    return out;
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.negotiation_overflows;
  }
  std::string all(std::accumulate(lens.begin(), lens.end(), size_t{0}), '\0');
  core::allgather(comm, bytes.data(), all.data(), lens, DataType::kUInt8);
  size_t at = 0;
  for (int r = 0; r < size; ++r) {
    out[r] = decode(std::string_view(all.data() + at, lens[r]));
    at += lens[r];
  }
  return out;
}

}  // namespace ringlet::core::runtime
