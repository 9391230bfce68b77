#include "core/runtime/cache_coordinator.h"

#include <algorithm>
#include <cstdint>

namespace ringlet::core::runtime {

namespace {
bool bit_of(const std::vector<uint8_t>& bits, size_t slot) {
  return slot / 8 < bits.size() && ((bits[slot / 8] >> (slot % 8)) & 1) != 0;
}
}  // namespace

void CacheCoordinator::report(const Metadata& md, RankMessage& mine) {
  if (cache_.enabled() && cacheable(md) && cache_.find(md)) {
    by_bit_[md.name] = &md;
    return;
  }
  if (auto slot = cache_.slot_of(md.name)) mine.invalidate.push_back(*slot);  // changed since
  mine.ready.push_back(md);
}

void CacheCoordinator::set_bits(RankMessage& mine) {
  if (by_bit_.empty()) return;
  std::vector<uint8_t> bits((cache_.span() + 7) / 8, 0);
  bool any = false;
  std::erase_if(by_bit_, [&](const auto& kv) {
    const auto slot = cache_.find(*kv.second);
    if (!slot) {
      mine.ready.push_back(*kv.second);
      return true;
    }
    bits[*slot / 8] |= static_cast<uint8_t>(1u << (*slot % 8));
    any = true;
    return false;
  });
  if (any) mine.cached_bits = std::move(bits);
}

std::vector<Response> CacheCoordinator::agreed(const std::vector<RankMessage>& messages,
                                               const std::vector<bool>& joined) {
  std::vector<Response> out;
  if (!cache_.enabled()) return out;
  for (const RankMessage& m : messages) {
    for (uint32_t slot : m.invalidate) cache_.erase(slot);
  }
  std::vector<const RankMessage*> active;
  for (size_t r = 0; r < messages.size(); ++r) {
    if (!joined[r]) active.push_back(&messages[r]);
  }
  if (active.empty()) return out;
  size_t len = SIZE_MAX;
  for (const RankMessage* m : active) len = std::min(len, m->cached_bits.size());
  for (size_t i = 0; i < len; ++i) {
    uint8_t all = 0xff;
    for (const RankMessage* m : active) all &= m->cached_bits[i];
    for (int b = 0; b < 8 && all; ++b) {
      if (!(all & (1u << b))) continue;
      const CachedResponse* cached = cache_.at(static_cast<uint32_t>(i * 8 + b));
      if (!cached) continue;
      const Metadata& md = cached->meta;
      Response r;
      r.kind = md.kind;
      r.names = {md.name};
      r.meta = {md};
      r.devices = cached->devices;
      r.bytes = md.elements() * static_cast<int64_t>(dtype_size(md.dtype));
      out.push_back(std::move(r));
    }
  }
  return out;
}

void CacheCoordinator::record(const std::vector<Response>& responses) {
  for (const Response& resp : responses) {
    if (!resp.error.empty() || resp.group) continue;
    for (const Metadata& m : resp.meta) {
      if (cacheable(m)) cache_.put(m, resp.devices);
    }
  }
}

std::map<std::string, std::vector<int>> CacheCoordinator::waiting(
    const std::vector<RankMessage>& messages, const std::vector<bool>& joined,
    const std::vector<int>& global_ranks) const {
  std::map<std::string, std::vector<int>> out;
  size_t longest = 0;
  for (const RankMessage& m : messages) longest = std::max(longest, m.cached_bits.size());
  // Runs every cycle over the whole span (the cache's capacity once full):
  // only the slots some rank set are looked at.
  for (size_t byte = 0; byte < longest; ++byte) {
    uint8_t some = 0;
    for (const RankMessage& m : messages) {
      if (byte < m.cached_bits.size()) some |= m.cached_bits[byte];
    }
    for (size_t bit = 0; some != 0 && bit < 8; ++bit) {
      if (((some >> bit) & 1) == 0) continue;
      const size_t slot = byte * 8 + bit;
      std::vector<int> missing;
      for (size_t r = 0; r < messages.size(); ++r) {
        if (!bit_of(messages[r].cached_bits, slot) && !joined[r])
          missing.push_back(global_ranks[r]);
      }
      const CachedResponse* cached = cache_.at(static_cast<uint32_t>(slot));
      if (missing.empty() || !cached) continue;
      out[cached->meta.name] = std::move(missing);
    }
  }
  return out;
}

void CacheCoordinator::withdraw(const std::string& name, std::vector<RankMessage>& messages) const {
  const auto slot = cache_.slot_of(name);
  if (!slot) return;
  for (RankMessage& m : messages) {
    if (*slot / 8 < m.cached_bits.size())
      m.cached_bits[*slot / 8] &= static_cast<uint8_t>(~(1u << (*slot % 8)));
  }
}

}  // namespace ringlet::core::runtime
