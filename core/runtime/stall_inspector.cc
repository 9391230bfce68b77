#include "core/runtime/stall_inspector.h"

#include "core/runtime/request.h"

namespace ringlet::core::runtime {

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

StallInspector::StallInspector(StallPolicy policy, int32_t process_set, Clock::time_point now)
    : policy_(policy),
      where_(process_set == 0 ? "" : " in process set " + std::to_string(process_set)),
      last_warning_check_(now) {}

bool StallInspector::active() const {
  return policy_.warn_after.count() > 0 || policy_.shutdown_after.count() > 0 ||
         policy_.fail_after.count() > 0;
}

std::string StallInspector::stalled_text(const std::map<std::string, std::vector<int>>& waiting,
                                         std::chrono::seconds older_than,
                                         Clock::time_point now) const {
  // Per missing rank, the names it has not submitted.
  std::map<int, std::vector<std::string>> by_rank;
  for (const auto& [name, missing] : waiting) {
    auto it = first_seen_.find(name);
    if (it == first_seen_.end() || now - it->second < older_than) continue;
    for (int r : missing) by_rank[r].push_back(name);
  }
  std::string text;
  for (const auto& [r, names] : by_rank)
    text += "; rank " + std::to_string(r) + " has not submitted " + names_text(names);
  return text;
}

StallVerdict StallInspector::inspect(const std::map<std::string, std::vector<int>>& waiting,
                                     Clock::time_point now) {
  StallVerdict v;
  if (!active()) return v;
  for (const auto& [name, missing] : waiting) first_seen_.try_emplace(name, now);
  std::erase_if(first_seen_, [&](const auto& kv) { return !waiting.count(kv.first); });
  if (waiting.empty()) return v;

  if (policy_.warn_after.count() > 0 && now - last_warning_check_ >= policy_.warn_after) {
    last_warning_check_ = now;
    const std::string text = stalled_text(waiting, policy_.warn_after, now);
    if (!text.empty()) v.warning = where_ + text;
  }
  if (policy_.shutdown_after.count() > 0 && !shutdown_decided_) {
    const std::string text = stalled_text(waiting, policy_.shutdown_after, now);
    if (!text.empty()) {
      shutdown_decided_ = true;
      v.shutdown = "ringlet: stall shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" +
                   std::to_string(policy_.shutdown_after.count()) +
                   "): tensors waited longer than that" + where_ + text;
    }
  }
  if (policy_.fail_after.count() > 0) {
    const std::string limit = std::to_string(policy_.fail_after.count());
    for (const auto& [name, missing] : waiting) {
      auto it = first_seen_.find(name);
      if (now - it->second < policy_.fail_after) continue;
      v.failed.push_back(
          {name, "ringlet: stall timeout (RINGLET_STALL_TIMEOUT_SECONDS=" + limit + "): '" + name +
                     "'" + where_ + " waited " + limit + " s for " + ranks_text(missing) +
                     ", which never submitted it; it failed on every rank that did, and the "
                     "runtime goes on (every rank must submit the same names)"});
      // Should a missing rank submit the name after all, before every rank has
      // dropped it, its wait starts afresh rather than failing at once.
      it->second = now;
    }
  }
  return v;
}

}  // namespace ringlet::core::runtime
