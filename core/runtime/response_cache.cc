#include "core/runtime/response_cache.h"

#include <algorithm>

namespace ringlet::core::runtime {

bool same_metadata(const Metadata& a, const Metadata& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.op == b.op && a.root == b.root &&
         a.prescale == b.prescale && a.postscale == b.postscale &&
         (a.device >= 0) == (b.device >= 0) && a.process_set == b.process_set &&
         a.shape == b.shape && a.splits == b.splits && a.group == b.group &&
         a.group_size == b.group_size;
}

bool cacheable(const Metadata& m) {
  return m.group.empty() &&
         (m.kind == CollectiveKind::kAllreduce || m.kind == CollectiveKind::kBroadcast ||
          m.kind == CollectiveKind::kReducescatter);
}

std::optional<uint32_t> ResponseCache::find(const Metadata& m) const {
  auto it = by_name_.find(m.name);
  if (it == by_name_.end()) return std::nullopt;
  const CachedResponse& cached = *slots_[it->second];
  if (!same_metadata(cached.meta, m)) return std::nullopt;
  if (m.device >= 0 &&
      (member_ >= static_cast<int>(cached.devices.size()) || cached.devices[member_] != m.device)) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<uint32_t> ResponseCache::slot_of(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

const CachedResponse* ResponseCache::at(uint32_t slot) const {
  return slot < slots_.size() && slots_[slot] ? &*slots_[slot] : nullptr;
}

void ResponseCache::touch(uint32_t slot) {
  auto it = lru_pos_.find(slot);
  if (it == lru_pos_.end()) return;
  lru_.splice(lru_.begin(), lru_, it->second);
}

void ResponseCache::erase(uint32_t slot) {
  if (!at(slot)) return;
  by_name_.erase(slots_[slot]->meta.name);
  slots_[slot].reset();
  lru_.erase(lru_pos_.at(slot));
  lru_pos_.erase(slot);
  free_.insert(std::upper_bound(free_.begin(), free_.end(), slot, std::greater<>()),
               slot);  // descending
}

void ResponseCache::put(const Metadata& m, std::vector<int32_t> devices) {
  if (!enabled()) return;
  if (auto slot = slot_of(m.name)) {
    slots_[*slot] = CachedResponse{m, std::move(devices)};
    touch(*slot);
    return;
  }
  if (by_name_.size() >= capacity_) erase(lru_.back());
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();  // the lowest erased slot
    free_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot] = CachedResponse{m, std::move(devices)};
  by_name_[m.name] = slot;
  lru_.push_front(slot);
  lru_pos_[slot] = lru_.begin();
}

}  // namespace ringlet::core::runtime
