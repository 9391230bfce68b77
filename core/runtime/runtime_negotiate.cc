// One cycle's negotiation over one process set: report what became ready
// here (in full or as response-cache bits), exchange with the set's members,
// apply the stall verdicts, and derive the responses every member runs; and,
// on the set's rank 0, the stall inspection that follows.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <unordered_set>

#include "core/collectives/collectives.h"
#include "core/nvtx/nvtx.h"
#include "core/runtime/runtime.h"
#include "core/timeline/timeline.h"
#include "ringlet/common/logging.h"

namespace ringlet::core::runtime {

namespace {

// Negotiation slot per rank: a 4-byte length and, when it fits, the message.
// Most cycles carry a few names or none, so one fixed-size allgather does;
// a longer message costs a second, variable-size allgather.
constexpr size_t kSlotBytes = 1024;
constexpr size_t kSlotPayload = kSlotBytes - sizeof(uint32_t);

}  // namespace

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
    std::string name = p.request.meta.name;
    auto it = reported_.emplace(std::move(name), std::move(p)).first;
    set.cache.report(it->second.request.meta, mine);
  }
  set.cache.set_bits(mine);
  mine.stalled = std::move(set.stalled_out);
  set.stalled_out.clear();
  std::optional<nvtx::Range> range;
  if (!mine.ready.empty() || !mine.cached_bits.empty()) {
    range.emplace("NEGOTIATE", 0, static_cast<int64_t>(mine.ready.size()));
  }
  try {
    messages = exchange(set, mine);
  } catch (const std::exception& e) {
    // The negotiation's own collective is part of what failed, not the
    // collective of the tensors that fail with it.
    const common::Failure f = failure_from(e, rank_);
    throw RuntimeError(
        common::Failure(f.kind(), rank_, f.peer(), "negotiation failed: " + f.body()));
  }
  fail_stalled(set, messages, tl);
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
  // Joined ranks count as having set every bit.
  std::vector<bool> joined(n);
  for (int r = 0; r < n; ++r) joined[r] = set.negotiator->joined(r) || messages[r].join;
  std::vector<Response> cached = set.cache.agreed(messages, joined);
  if (!cached.empty()) {
    std::lock_guard lock(mu_);
    stats_.cached_tensors += cached.size();
  }
  std::vector<Response> responses =
      set.negotiator->add_cycle(messages, fusion_threshold_, std::move(cached));
  // Every member updates its cache from the same responses, in order.
  set.cache.record(responses);
  return responses;
}

void Runtime::fail_stalled(ProcessSet& set, std::vector<RankMessage>& messages,
                           timeline::Timeline* tl) {
  for (size_t from = 0; from < messages.size(); ++from) {
    for (const StalledName& stalled : messages[from].stalled) {
      // Waiting in the negotiation table (with its group, if any), or as a
      // response-cache bit, which the table never saw.
      std::vector<std::string> names = set.negotiator->drop(stalled.name);
      if (std::find(names.begin(), names.end(), stalled.name) == names.end())
        names.insert(names.begin(), stalled.name);
      for (const std::string& name : names) {
        // A rank that submits the name only now (after the verdict) fails
        // it too: the others have given it up.
        for (RankMessage& m : messages) {
          std::erase_if(m.ready, [&](const Metadata& md) { return md.name == name; });
        }
        set.cache.withdraw(name, messages);
        if (tl) tl->negotiate_end(name);
        fail(name, ErrorKind::kStalled, stalled.error);
      }
    }
  }
}

// The set's rank 0 only: every negotiator of the set holds the same table, so
// one rank can judge it; a stall shutdown travels to every rank in this
// rank's next world message, a stalled collective in its next message of the
// set.
void Runtime::inspect_stalls(ProcessSet& set, const std::vector<RankMessage>& messages) {
  if (!set.stall.active()) return;
  const int n = static_cast<int>(set.ranks.size());
  auto waiting = set.negotiator->waiting();
  // Names reported through the response cache wait as bits: set by some
  // ranks, not all (joined ranks count as set).
  std::vector<bool> joined(n);
  for (int r = 0; r < n; ++r) joined[r] = set.negotiator->joined(r);
  for (auto& [name, missing] : set.cache.waiting(messages, joined, set.ranks))
    waiting[name] = std::move(missing);
  StallVerdict verdict = set.stall.inspect(waiting, Clock::now());
  if (!verdict.warning.empty()) {
    const Config& c = comm_->config();
    common::log(common::LogLevel::kWarning,
                "stall: tensors submitted by some ranks have waited more than %d s for the others "
                "(ranks submitting different names, or only some ranks submitting, deadlock "
                "training)%s",
                c.stall_check_seconds, verdict.warning.c_str());
    std::lock_guard lock(mu_);
    ++stats_.stall_warnings;
  }
  if (!verdict.shutdown.empty() && pending_abort_.empty()) {
    pending_abort_ = std::move(verdict.shutdown);
    work_cv_.notify_one();
  }
  for (StalledName& s : verdict.failed) set.stalled_out.push_back(std::move(s));
}

std::vector<RankMessage> Runtime::exchange(ProcessSet& set, const RankMessage& mine) {
  Communicator& comm = *set.comm;
  const int size = comm.size();
  std::vector<char>& slots = set.slots;
  const bool empty = mine.ready.empty() && !mine.shutdown && !mine.join && mine.abort.empty() &&
                     mine.cached_bits.empty() && mine.invalidate.empty() &&
                     mine.set_changes.empty() && mine.stalled.empty();
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
      out[r] = decode(std::string_view(slots.data() + kSlotBytes * r + sizeof(uint32_t), lens[r]),
                      set.ranks[r]);
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
    out[r] = decode(std::string_view(all.data() + at, lens[r]), set.ranks[r]);
    at += lens[r];
  }
  return out;
}

}  // namespace ringlet::core::runtime
