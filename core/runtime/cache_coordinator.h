// The cache coordinator: one process set's side of the response cache
// (response_cache.h) during negotiation. It decides whether a new request goes
// out in full or as one bit, keeps the requests reported by bit until they run
// (their bits go out every cycle, as in Horovod), turns the ranks' bit vectors
// into the responses every rank agrees on (the AND of the vectors), and
// records what ran so that every member's cache stays the same.
//
// It needs no communicator: a test feeds it the messages the ranks exchanged.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/runtime/negotiation.h"
#include "core/runtime/response_cache.h"

namespace ringlet::core::runtime {

class CacheCoordinator {
 public:
  // `member`: this rank's index in the process set.
  explicit CacheCoordinator(size_t capacity, int member = 0) : cache_(capacity, member) {}
  bool enabled() const { return cache_.enabled(); }
  const ResponseCache& cache() const { return cache_; }

  // A request newly submitted on this rank. Cached with the same metadata: it
  // will go out as a bit (set_bits). Otherwise it goes out in full in
  // `mine.ready`, and where the name is cached with other metadata every rank
  // is asked to erase that slot. `md` must stay valid until forget(md.name).
  void report(const Metadata& md, RankMessage& mine);
  // Sets this cycle's bit of every request reported by bit and not run yet;
  // one whose slot was erased or evicted since goes out in full instead.
  void set_bits(RankMessage& mine);
  // The request ran or failed: its bit goes out no more.
  void forget(const std::string& name) { by_bit_.erase(name); }
  void forget_all() { by_bit_.clear(); }

  // Applies the cycle's erasures, then answers the slots whose bit every
  // active rank set, in slot order. `joined[r]`: rank r has joined (it counts
  // as having set every bit).
  std::vector<Response> agreed(const std::vector<RankMessage>& messages,
                               const std::vector<bool>& joined);
  // Caches what the cycle agreed (every member, the same responses in order).
  void record(const std::vector<Response>& responses);

  // Names waiting as bits: set by some ranks, not all. name -> the global
  // ranks (`global_ranks[r]` names rank r) that have not set it; joined ranks
  // are not missing.
  std::map<std::string, std::vector<int>> waiting(const std::vector<RankMessage>& messages,
                                                  const std::vector<bool>& joined,
                                                  const std::vector<int>& global_ranks) const;
  // Clears `name`'s bit in every message, so that a collective failed this
  // cycle is not also agreed through the cache (the same on every member).
  void withdraw(const std::string& name, std::vector<RankMessage>& messages) const;

 private:
  ResponseCache cache_;
  std::map<std::string, const Metadata*> by_bit_;  // reported by bit, not run yet
};

}  // namespace ringlet::core::runtime
