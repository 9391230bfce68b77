#include "core/runtime/process_set_table.h"

#include <algorithm>
#include <numeric>

#include "core/runtime/request.h"
#include "core/runtime/runtime_error.h"

namespace ringlet::core::runtime {

std::string set_text(const std::vector<int>& ranks) {
  return shape_string(std::vector<int64_t>(ranks.begin(), ranks.end()));
}

std::string describe(const SetChange& c) {
  return c.remove_id >= 0 ? "remove_process_set(" + std::to_string(c.remove_id) + ")"
                          : "add_process_set(" +
                                set_text(std::vector<int>(c.ranks.begin(), c.ranks.end())) + ")";
}

ProcessSetTable::ProcessSetTable(int world_size, int rank)
    : world_size_(world_size), rank_(rank), inbox_(world_size) {
  std::vector<int> everyone(world_size);
  std::iota(everyone.begin(), everyone.end(), 0);
  ranks_.emplace(0, std::move(everyone));
}

std::vector<int> ProcessSetTable::checked(std::vector<int> ranks, const std::string& call) const {
  auto bad = [&](const std::string& why) {
    return RuntimeError(ErrorKind::kInvalidArgument, rank_, call + ": " + why);
  };
  if (ranks.empty()) throw bad("a process set needs at least one rank");
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world_size_) {
      throw bad("rank " + std::to_string(ranks[i]) + " is not a rank of the " +
                std::to_string(world_size_) + "-rank job");
    }
    if (i > 0 && ranks[i] == ranks[i - 1])
      throw bad("rank " + std::to_string(ranks[i]) + " is listed twice");
  }
  return ranks;
}

void ProcessSetTable::add_static(std::vector<std::vector<int>> sets) {
  std::vector<std::vector<int>> checked_sets;
  for (size_t i = 0; i < sets.size(); ++i) {
    std::vector<int> ranks = checked(std::move(sets[i]), "process set " + std::to_string(i + 1));
    for (size_t k = 0; k < checked_sets.size(); ++k) {
      if (checked_sets[k] == ranks) {
        throw RuntimeError(ErrorKind::kInvalidArgument, rank_,
                           "process sets " + std::to_string(k + 1) + " and " +
                               std::to_string(i + 1) + " both hold ranks " + set_text(ranks));
      }
    }
    checked_sets.push_back(std::move(ranks));
  }
  std::lock_guard lock(mu_);
  for (std::vector<int>& ranks : checked_sets) ranks_.emplace(next_id_++, std::move(ranks));
}

std::optional<std::vector<int>> ProcessSetTable::ranks(int32_t id) const {
  std::lock_guard lock(mu_);
  auto it = ranks_.find(id);
  if (it == ranks_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> ProcessSetTable::ids() const {
  std::lock_guard lock(mu_);
  std::vector<int32_t> ids;
  for (const auto& [id, ranks] : ranks_) ids.push_back(id);
  return ids;
}

int32_t ProcessSetTable::reserve(const std::vector<int>& ranks) {
  std::lock_guard lock(mu_);
  for (const auto& [id, existing] : ranks_) {
    if (existing == ranks) {
      throw RuntimeError(
          ErrorKind::kInvalidArgument,
          "process set " + std::to_string(id) + " already holds ranks " + set_text(ranks));
    }
  }
  return next_id_++;
}

void ProcessSetTable::add(int32_t id, std::vector<int> ranks) {
  std::lock_guard lock(mu_);
  ranks_.emplace(id, std::move(ranks));
}

void ProcessSetTable::erase(int32_t id) {
  std::lock_guard lock(mu_);
  ranks_.erase(id);
}

void ProcessSetTable::receive(const std::vector<RankMessage>& world_messages) {
  for (size_t r = 0; r < world_messages.size() && r < inbox_.size(); ++r) {
    for (const SetChange& c : world_messages[r].set_changes) inbox_[r].push_back(c);
  }
}

std::optional<ProcessSetTable::Agreed> ProcessSetTable::next_agreed() {
  if (!std::all_of(inbox_.begin(), inbox_.end(), [](const auto& q) { return !q.empty(); }))
    return std::nullopt;
  std::vector<SetChange> asked(inbox_.size());
  for (size_t r = 0; r < inbox_.size(); ++r) {
    asked[r] = std::move(inbox_[r].front());
    inbox_[r].pop_front();
  }
  Agreed a;
  for (size_t r = 1; r < asked.size() && a.mismatch.empty(); ++r) {
    if (!(asked[r] == asked[0])) {
      a.mismatch = "Mismatched process set changes: rank 0 called " + describe(asked[0]) +
                   ", rank " + std::to_string(r) + " called " + describe(asked[r]) +
                   " (every rank must make the same calls in the same order)";
    }
  }
  a.change = std::move(asked[0]);
  return a;
}

}  // namespace ringlet::core::runtime
