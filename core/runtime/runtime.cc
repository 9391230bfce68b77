#include "core/runtime/runtime.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
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

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

Runtime::Runtime(std::unique_ptr<Communicator> comm)
    : comm_(std::move(comm)),
      rank_(comm_->rank()),
      size_(comm_->size()),
      fusion_threshold_(comm_->config().fusion_threshold),
      cycle_time_(std::chrono::nanoseconds(static_cast<int64_t>(comm_->config().cycle_time_ms * 1e6))),
      negotiator_(std::make_unique<Negotiator>(comm_->size())),
      cache_(static_cast<size_t>(std::max<int64_t>(0, comm_->config().cache_capacity))) {
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

// ---------------------------------------------------------------- submission

Handle Runtime::enqueue_allreduce(std::string name, const void* input, void* output, std::vector<int64_t> shape,
                                  DataType dtype, ReduceOp op, double prescale, double postscale, Device device) {
  Request r;
  r.meta.name = std::move(name);
  r.meta.kind = CollectiveKind::kAllreduce;
  r.meta.dtype = dtype;
  r.meta.op = op;
  r.meta.prescale = prescale;
  r.meta.postscale = postscale;
  r.meta.shape = std::move(shape);
  r.device = device;
  r.input = input;
  r.output = output;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_allgather(std::string name, const void* input, std::vector<int64_t> shape, DataType dtype,
                                  Device device) {
  Request r;
  r.meta.name = std::move(name);
  r.meta.kind = CollectiveKind::kAllgather;
  r.meta.dtype = dtype;
  r.meta.shape = std::move(shape);
  r.device = device;
  r.input = input;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_broadcast(std::string name, void* buffer, std::vector<int64_t> shape, DataType dtype,
                                  int root, Device device) {
  Request r;
  r.meta.name = std::move(name);
  r.meta.kind = CollectiveKind::kBroadcast;
  r.meta.dtype = dtype;
  r.meta.root = root;
  r.meta.shape = std::move(shape);
  r.device = device;
  r.input = buffer;
  r.output = buffer;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_reducescatter(std::string name, const void* input, std::vector<int64_t> shape,
                                      DataType dtype, ReduceOp op, double prescale, double postscale,
                                      Device device) {
  Request r;
  r.meta.name = std::move(name);
  r.meta.kind = CollectiveKind::kReducescatter;
  r.meta.dtype = dtype;
  r.meta.op = op;
  r.meta.prescale = prescale;
  r.meta.postscale = postscale;
  r.meta.shape = std::move(shape);
  r.device = device;
  r.input = input;
  return enqueue(std::move(r));
}

Handle Runtime::enqueue_alltoall(std::string name, const void* input, std::vector<int64_t> shape, DataType dtype,
                                 std::vector<int64_t> splits, Device device) {
  Request r;
  r.meta.name = std::move(name);
  r.meta.kind = CollectiveKind::kAlltoall;
  r.meta.dtype = dtype;
  r.meta.shape = std::move(shape);
  r.meta.splits = std::move(splits);
  r.device = device;
  r.input = input;
  return enqueue(std::move(r));
}

std::vector<Handle> Runtime::enqueue_grouped_allreduce(std::vector<GroupMember> members, DataType dtype,
                                                       ReduceOp op, double prescale, double postscale,
                                                       Device device) {
  uint64_t seq;
  {
    std::lock_guard lock(mu_);
    seq = group_sequence_++;
  }
  const std::string group = "ringlet.group." + std::to_string(seq);
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
        return RuntimeError("rank " + std::to_string(rank_) + ": grouped allreduce member '" + m.name + "': " + why);
      };
      if (m.name.empty()) throw bad("a collective needs a non-empty name");
      if (!seen.insert(m.name).second) throw bad("the name appears twice in the group");
      if (in_flight_.count(m.name)) throw bad("a collective of this name is already in flight on this rank");
      int64_t n = 1;
      for (int64_t d : m.shape) {
        if (d < 0) throw bad("negative dimension in shape " + shape_string(m.shape));
        n *= d;
      }
      if (n > 0 && (!m.input || !m.output)) throw bad("null input or output buffer");
    }
  }
  for (GroupMember& m : members) {
    Request r;
    r.meta.name = std::move(m.name);
    r.meta.kind = CollectiveKind::kAllreduce;
    r.meta.dtype = dtype;
    r.meta.op = op;
    r.meta.prescale = prescale;
    r.meta.postscale = postscale;
    r.meta.shape = std::move(m.shape);
    r.meta.group = group;
    r.meta.group_size = static_cast<int32_t>(members.size());
    r.device = device;
    r.input = m.input;
    r.output = m.output;
    handles.push_back(enqueue(std::move(r)));
  }
  return handles;
}

Handle Runtime::enqueue_barrier() {
  uint64_t seq;
  {
    std::lock_guard lock(mu_);
    seq = barrier_sequence_++;
  }
  // A name is ready only once every rank submitted it: negotiating an empty
  // tensor is the barrier; nothing moves.
  return enqueue_allreduce("ringlet.barrier." + std::to_string(seq), nullptr, nullptr, {0}, DataType::kUInt8,
                           ReduceOp::kMax);
}

void Runtime::barrier() { synchronize(enqueue_barrier()); }

Handle Runtime::enqueue_join() {
  std::lock_guard lock(mu_);
  const std::string me = "rank " + std::to_string(rank_) + ": join: ";
  if (!stopped_.empty()) throw RuntimeError(me + "the runtime has stopped: " + stopped_);
  if (join_requested_) throw RuntimeError(me + "this rank has joined already");
  join_requested_ = true;
  join_handle_ = handles_.create();
  if (loop_idle_) {
    loop_idle_ = false;
    work_cv_.notify_one();
  }
  return join_handle_;
}

int Runtime::join() {
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
    return RuntimeError("rank " + std::to_string(rank_) + ": " + kind + " '" + m.name + "': " + why);
  };
  if (m.name.empty()) throw bad("a collective needs a non-empty name");
  if (!is_valid(m.dtype)) throw bad("invalid dtype " + std::to_string(static_cast<int>(m.dtype)));
  if (!is_valid(m.op)) throw bad("invalid reduce op " + std::to_string(static_cast<int>(m.op)));
  for (int64_t d : m.shape) {
    if (d < 0) throw bad("negative dimension in shape " + shape_string(m.shape));
  }
  if (r.device.id >= 0) throw bad("device tensors (cuda:" + std::to_string(r.device.id) + ") are not served by this runtime yet");
  if (m.process_set != 0) throw bad("process sets other than 0 (the world) are not supported");
  m.device = r.device.id;
  const int64_t n = m.elements();
  switch (m.kind) {
    case CollectiveKind::kAllreduce:
      if (n > 0 && (!r.input || !r.output)) throw bad("null input or output buffer");
      break;
    case CollectiveKind::kBroadcast:
      if (m.root < 0 || m.root >= size_) {
        throw bad("root " + std::to_string(m.root) + " is not a rank of " + std::to_string(size_));
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
      if (m.shape[0] % size_ != 0) {
        throw bad("first dimension " + std::to_string(m.shape[0]) + " does not split evenly over " +
                  std::to_string(size_) + " ranks; give splits");
      }
      m.splits.assign(size_, m.shape[0] / size_);
    }
    if (static_cast<int>(m.splits.size()) != size_) {
      throw bad("splits has " + std::to_string(m.splits.size()) + " entries for " + std::to_string(size_) + " ranks");
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
  if (!stopped_.empty()) throw bad("the runtime has stopped: " + stopped_);
  if (shutdown_requested_) throw bad("the runtime is shutting down");
  if (join_requested_) throw bad("this rank has joined; it may submit again once every rank has joined");
  if (!in_flight_.insert(m.name).second) {
    throw bad("a collective of this name is already in flight on this rank; synchronize it before "
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
  while (old.use_count() > 1 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  old.reset();
}

// ---------------------------------------------------------------- the loop

void Runtime::loop() {
  // The loop's timed waits are microseconds long (the burst gap); Linux's
  // default 50 us timer slack would stretch each of them several-fold.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  auto next_cycle = Clock::now();
  try {
    while (true) {
      RankMessage mine;
      std::vector<Pending> fresh;
      std::shared_ptr<timeline::Timeline> tl;
      {
        std::unique_lock lock(mu_);
        loop_idle_ = true;
        work_cv_.wait_until(lock, next_cycle, [&] { return !queue_.empty() || shutdown_requested_; });
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
        mine.shutdown = shutdown_requested_;
        mine.abort = pending_abort_;
        mine.join = join_requested_ && !join_sent_;
        join_sent_ |= mine.join;
        tl = timeline_;
      }
      next_cycle = Clock::now() + cycle_time_;
      if (tl) tl->cycle_start();

      for (Pending& p : fresh) {
        const Metadata& md = p.request.meta;
        if (cache_.enabled() && cacheable(md) && cache_.find(md)) {
          cached_pending_.insert(md.name);  // reported by bit below
        } else {
          if (auto slot = cache_.slot_of(md.name)) mine.invalidate.push_back(*slot);  // changed since cached
          mine.ready.push_back(md);
        }
        std::string name = md.name;
        reported_.emplace(std::move(name), std::move(p));
      }
      set_cached_bits(mine);
      std::vector<Response> responses;
      std::vector<RankMessage> messages;
      {
        std::optional<nvtx::Range> range;
        if (!reported_.empty()) range.emplace("NEGOTIATE", 0, static_cast<int64_t>(mine.ready.size()));
        try {
          messages = exchange(mine);
        } catch (const std::exception& e) {
          throw RuntimeError(std::string("negotiation failed: ") + e.what());
        }
        for (const RankMessage& m : messages) {
          if (!m.abort.empty()) {
            fail_everything(m.abort);
            final_barrier();
            return;
          }
        }
        if (tl) {
          // A span opens when the first rank reports the name; each rank
          // leaves a mark when it reports.
          std::unordered_set<std::string> opened;
          for (int r = 0; r < size_; ++r) {
            for (const Metadata& m : messages[r].ready) {
              if (!opened.count(m.name) && negotiator_->reported_by(m.name).empty()) {
                tl->negotiate_start(m.name, std::string(to_upper_string(m.kind)));
                opened.insert(m.name);
              }
              tl->rank_ready(m.name, r);
            }
          }
        }
        responses = negotiator_->add_cycle(messages, fusion_threshold_, cached_responses(messages));
        // Every rank updates its cache from the same responses, in order.
        for (const Response& resp : responses) {
          if (!resp.error.empty() || resp.group) continue;
          for (const Metadata& m : resp.meta) {
            if (cacheable(m)) cache_.put(m);
          }
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
      if (tl) {
        for (const Response& resp : responses) {
          for (const std::string& name : resp.names) {
            tl->negotiate_end(name);
            tl->op_start(name, std::string(to_upper_string(resp.kind)), resp.bytes);
            tl->activity_start(name, "QUEUE");
          }
        }
      }
      for (const Response& resp : responses) execute(resp, tl.get());
      if (auto last = negotiator_->take_join_result()) {
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
      if (rank_ == 0) inspect_stalls(messages);
      if (stopper >= 0) {
        const std::string why = "ringlet was shut down (requested by rank " + std::to_string(stopper) + ")";
        const auto waiting = negotiator_->waiting();
        for (const auto& [name, missing] : waiting) {
          if (reported_.count(name)) {
            fail(name, why + " before '" + name + "' was submitted on every rank (missing on " +
                           ranks_text(missing) + ")");
          }
        }
        fail_everything(why);
        final_barrier();
        return;
      }
    }
  } catch (const std::exception& e) {
    fail_everything(e.what());
  }
}

// Bits for every request this rank reported through the cache and that has
// not run yet (Horovod resends them each cycle too); a request whose slot was
// erased or evicted since goes out in full instead.
void Runtime::set_cached_bits(RankMessage& mine) {
  if (cached_pending_.empty()) return;
  std::vector<uint8_t> bits((cache_.span() + 7) / 8, 0);
  bool any = false;
  std::erase_if(cached_pending_, [&](const std::string& name) {
    auto it = reported_.find(name);
    if (it == reported_.end()) return true;  // failed with the runtime
    const auto slot = cache_.find(it->second.request.meta);
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
std::vector<Response> Runtime::cached_responses(const std::vector<RankMessage>& messages) {
  std::vector<Response> out;
  if (!cache_.enabled()) return out;
  for (const RankMessage& m : messages) {
    for (uint32_t slot : m.invalidate) cache_.erase(slot);
  }
  // Joined ranks count as having set every bit.
  std::vector<const RankMessage*> active;
  for (int r = 0; r < size_; ++r) {
    if (!negotiator_->joined(r) && !messages[r].join) active.push_back(&messages[r]);
  }
  if (active.empty()) return out;
  size_t len = SIZE_MAX;
  for (const RankMessage* m : active) len = std::min(len, m->cached_bits.size());
  for (size_t i = 0; i < len; ++i) {
    uint8_t all = 0xff;
    for (const RankMessage* m : active) all &= m->cached_bits[i];
    for (int b = 0; b < 8 && all; ++b) {
      if (!(all & (1u << b))) continue;
      const Metadata* md = cache_.at(static_cast<uint32_t>(i * 8 + b));
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

// Rank 0 only: every negotiator holds the same table, so one rank can judge
// it; the decision to stop travels to the others in rank 0's next message.
void Runtime::inspect_stalls(const std::vector<RankMessage>& messages) {
  const Config& c = comm_->config();
  if (c.stall_check_seconds <= 0 && c.stall_shutdown_seconds <= 0) return;
  const auto now = Clock::now();
  for (const RankMessage& m : messages) {
    for (const Metadata& md : m.ready) first_seen_.try_emplace(md.name, now);
  }
  auto waiting = negotiator_->waiting();
  // Names reported through the response cache wait as bits: set by some
  // ranks, not all (joined ranks count as set).
  size_t longest = 0;
  for (const RankMessage& m : messages) longest = std::max(longest, m.cached_bits.size());
  for (size_t slot = 0; slot < longest * 8; ++slot) {
    std::vector<int> missing;
    bool some = false;
    for (int r = 0; r < size_; ++r) {
      const auto& bits = messages[r].cached_bits;
      const bool set = slot / 8 < bits.size() && (bits[slot / 8] >> (slot % 8)) & 1;
      some |= set;
      if (!set && !negotiator_->joined(r)) missing.push_back(r);
    }
    const Metadata* md = cache_.at(static_cast<uint32_t>(slot));
    if (!some || missing.empty() || !md) continue;
    first_seen_.try_emplace(md->name, now);
    waiting[md->name] = std::move(missing);
  }
  std::erase_if(first_seen_, [&](const auto& kv) { return !waiting.count(kv.first); });
  if (waiting.empty()) return;
  auto stalled_text = [&](std::chrono::seconds older_than, bool& any) {
    // Per missing rank, the names it has not submitted.
    std::map<int, std::vector<std::string>> by_rank;
    for (const auto& [name, missing] : waiting) {
      auto it = first_seen_.find(name);
      if (it == first_seen_.end() || now - it->second < older_than) continue;
      for (int r : missing) by_rank[r].push_back(name);
    }
    any = !by_rank.empty();
    std::string text;
    for (const auto& [r, names] : by_rank) text += "; rank " + std::to_string(r) + " has not submitted " + names_text(names);
    return text;
  };
  if (c.stall_check_seconds > 0 && now - last_stall_check_ >= std::chrono::seconds(c.stall_check_seconds)) {
    last_stall_check_ = now;
    bool any = false;
    const std::string text = stalled_text(std::chrono::seconds(c.stall_check_seconds), any);
    if (any) {
      std::fprintf(stderr,
                   "ringlet: stall warning: tensors submitted by some ranks have waited more than %d s for the "
                   "others (ranks submitting different names, or only some ranks submitting, deadlock "
                   "training)%s\n",
                   c.stall_check_seconds, text.c_str());
      std::lock_guard lock(mu_);
      ++stats_.stall_warnings;
    }
  }
  if (c.stall_shutdown_seconds > 0 && pending_abort_.empty()) {
    bool any = false;
    const std::string text = stalled_text(std::chrono::seconds(c.stall_shutdown_seconds), any);
    if (any) {
      pending_abort_ = "ringlet: stall shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" +
                       std::to_string(c.stall_shutdown_seconds) + "): tensors waited longer than that" + text;
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

std::vector<RankMessage> Runtime::exchange(const RankMessage& mine) {
  const bool empty = mine.ready.empty() && !mine.shutdown && !mine.join && mine.abort.empty() &&
                     mine.cached_bits.empty() && mine.invalidate.empty();
  const std::string bytes = empty ? std::string() : encode(mine);
  slots_.assign(kSlotBytes * size_, 0);
  char* own = slots_.data() + kSlotBytes * rank_;
  const uint32_t len = static_cast<uint32_t>(bytes.size());
  std::memcpy(own, &len, sizeof len);
  if (len <= kSlotPayload) std::memcpy(own + sizeof len, bytes.data(), len);
  const std::vector<size_t> slot_counts(size_, kSlotBytes);
  core::allgather(*comm_, own, slots_.data(), slot_counts, DataType::kUInt8);

  std::vector<size_t> lens(size_);
  bool overflow = false;
  for (int r = 0; r < size_; ++r) {
    uint32_t l;
    std::memcpy(&l, slots_.data() + kSlotBytes * r, sizeof l);
    lens[r] = l;
    overflow |= l > kSlotPayload;
  }
  std::vector<RankMessage> out(size_);
  if (!overflow) {
    for (int r = 0; r < size_; ++r) {
      out[r] = decode(std::string_view(slots_.data() + kSlotBytes * r + sizeof(uint32_t), lens[r]));
    }
    return out;
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.negotiation_overflows;
  }
  std::string all(std::accumulate(lens.begin(), lens.end(), size_t{0}), '\0');
  core::allgather(*comm_, bytes.data(), all.data(), lens, DataType::kUInt8);
  size_t at = 0;
  for (int r = 0; r < size_; ++r) {
    out[r] = decode(std::string_view(all.data() + at, lens[r]));
    at += lens[r];
  }
  return out;
}

}  // namespace ringlet::core::runtime
