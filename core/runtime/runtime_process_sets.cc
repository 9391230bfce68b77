// The runtime's process sets: add and remove on the callers' side, and on
// the loop's side the changes every rank applies at the same cycle, which
// build or tear down a set's communicator where this rank is a member (the
// bookkeeping itself is process_set_table.h's).
#include <algorithm>
#include <cstring>

#include "core/collectives/collectives.h"
#include "core/nvtx/nvtx.h"
#include "core/runtime/runtime.h"

namespace ringlet::core::runtime {

Handle Runtime::submit_set_change(SetChange change) {
  std::lock_guard lock(mu_);
  if (!stopped_.empty())
    throw RuntimeError(stopped_kind_, rank_, "the runtime has stopped: " + stopped_);
  if (shutdown_requested_)
    throw RuntimeError(ErrorKind::kShutdown, rank_, "the runtime is shutting down");
  if (join_requested_) {
    throw RuntimeError(ErrorKind::kInvalidArgument, rank_,
                       "this rank has joined; process sets cannot change until every rank has");
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
  for (int r : set_table_.checked(std::move(ranks), "add_process_set")) change.ranks.push_back(r);
  const Result r = synchronize(submit_set_change(std::move(change)));
  int32_t id = -1;
  if (r.data.size() == sizeof id) std::memcpy(&id, r.data.data(), sizeof id);
  return id;
}

void Runtime::remove_process_set(int32_t id) {
  nvtx::Range range("REMOVE_PROCESS_SET");
  if (id == 0) {
    throw RuntimeError(ErrorKind::kInvalidArgument, rank_,
                       "remove_process_set: process set 0 is the world; it cannot be removed");
  }
  process_set_ranks(id);  // unknown ids fail here, before the others are involved
  SetChange change;
  change.remove_id = id;
  synchronize(submit_set_change(std::move(change)));
}

std::vector<int> Runtime::process_set_ranks(int32_t id) const {
  std::optional<std::vector<int>> ranks = set_table_.ranks(id);
  if (!ranks) {
    throw RuntimeError(ErrorKind::kInvalidArgument, rank_,
                       "there is no process set " + std::to_string(id));
  }
  return std::move(*ranks);
}

std::vector<int32_t> Runtime::process_set_ids() const { return set_table_.ids(); }

int32_t Runtime::create_process_set(const std::vector<int>& ranks) {
  const int32_t id = set_table_.reserve(ranks);
  open_process_set(id, ranks);
  set_table_.add(id, ranks);
  return id;
}

void Runtime::open_process_set(int32_t id, const std::vector<int>& ranks) {
  if (std::binary_search(ranks.begin(), ranks.end(), rank_)) {
    const int member =
        static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), rank_) - ranks.begin());
    auto set = std::make_unique<ProcessSet>(cache_capacity_, stall_policy_, id, member);
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
    // Its NCCL communicators and CUDA IPC windows go with it.
    if (device_collectives_) device_collectives_->release_process_set(id);
    sets_.erase(it);
  }
  set_table_.erase(id);
}

// Every rank sees the same messages, so every rank applies the same changes
// at the same cycle, in the order each rank asked for them.
void Runtime::apply_set_changes(const std::vector<RankMessage>& world_messages) {
  set_table_.receive(world_messages);
  while (std::optional<ProcessSetTable::Agreed> agreed = set_table_.next_agreed()) {
    PendingSetChange mine = std::move(sent_set_changes_.front());
    sent_set_changes_.pop_front();
    std::string error = agreed->mismatch;
    ErrorKind kind = ErrorKind::kMismatch;
    Result result;
    if (error.empty()) {
      try {
        int32_t id = agreed->change.remove_id;
        if (id >= 0) {
          if (!set_table_.ranks(id)) {
            throw RuntimeError(
                ErrorKind::kInvalidArgument,
                "there is no process set " + std::to_string(id) + " (removed already?)");
          }
          destroy_process_set(id);
        } else {
          id = create_process_set({agreed->change.ranks.begin(), agreed->change.ranks.end()});
        }
        result.data.resize(sizeof id);
        std::memcpy(result.data.data(), &id, sizeof id);
      } catch (const std::exception& e) {
        // A refused change fails only its handles; a failure while meeting
        // the members (a lost peer) ends the runtime.
        common::Failure f = failure_from(e, rank_);
        kind = f.kind();
        if (kind != ErrorKind::kInvalidArgument) {
          f.set_cause(describe(mine.change) + ": " + f.cause());
          handles_.fail(mine.handle, std::move(f));
          throw;
        }
        error = f.cause();
      }
    }
    if (error.empty()) {
      handles_.complete(mine.handle, std::move(result));
    } else {
      handles_.fail(mine.handle,
                    common::Failure(kind, rank_, -1, describe(mine.change) + ": " + error));
    }
  }
}

}  // namespace ringlet::core::runtime
