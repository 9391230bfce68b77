// The response cache (HOROVOD_CACHE_CAPACITY): names that ran before, with the
// metadata they ran with, each in a numbered slot. Every rank applies the same
// insertions, touches and erasures in the same order (they follow the agreed
// responses), so slot numbers mean the same on every rank. In steady state a
// rank then reports a ready tensor as one bit (its slot) instead of its
// metadata, and a name is ready when its bit is set on every rank: the AND of
// the ranks' bit vectors, which travel in the negotiation allgather.
//
// Cached: allreduce, broadcast and reducescatter outside groups, whose
// metadata is the same on every rank but for the device: each slot keeps
// every member's device as the agreed response had them, and a rank's
// request matches when its device is its own entry there (ranks on different
// GPUs hit every step). A rank whose request differs from the
// cached entry sends its metadata in full and asks every rank to erase the
// slot; requests reported by bit for an erased or evicted slot are sent again
// in full, so the usual negotiation validates them.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/runtime/request.h"

namespace ringlet::core::runtime {

// All but the name and the device ordinal (host or device memory must agree).
bool same_metadata(const Metadata& a, const Metadata& b);
bool cacheable(const Metadata& m);

// What a slot holds: the agreed metadata and every member's device
// (Response::devices; empty for host tensors).
struct CachedResponse {
  Metadata meta;
  std::vector<int32_t> devices;
};

class ResponseCache {
 public:
  // `member`: this rank's index in the process set, which picks its own
  // entry of a slot's devices.
  explicit ResponseCache(size_t capacity, int member = 0) : capacity_(capacity), member_(member) {}
  bool enabled() const { return capacity_ > 0; }
  size_t size() const { return by_name_.size(); }

  // The slot of `m`'s name when cached with the same metadata and, for a
  // device tensor, with this rank on `m.device`.
  std::optional<uint32_t> find(const Metadata& m) const;
  // The slot of `name`, whatever its metadata.
  std::optional<uint32_t> slot_of(const std::string& name) const;
  const CachedResponse* at(uint32_t slot) const;  // null when empty
  // Inserts or refreshes (most recently used); evicts the least recently used
  // entry when full.
  void put(const Metadata& m, std::vector<int32_t> devices = {});
  void touch(uint32_t slot);
  void erase(uint32_t slot);
  // Slots in use are below this bound (the bit vector's length in bits).
  uint32_t span() const { return static_cast<uint32_t>(slots_.size()); }

 private:
  size_t capacity_;
  int member_;
  std::vector<std::optional<CachedResponse>> slots_;
  std::vector<uint32_t> free_;  // erased slots, reused lowest first
  std::unordered_map<std::string, uint32_t> by_name_;
  std::list<uint32_t> lru_;  // front: most recently used
  std::unordered_map<uint32_t, std::list<uint32_t>::iterator> lru_pos_;
};

}  // namespace ringlet::core::runtime
