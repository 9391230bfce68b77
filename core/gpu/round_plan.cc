#include "core/gpu/round_plan.h"

#include <algorithm>

namespace ringlet::core::gpu {

size_t padded(size_t elements, size_t element_bytes) {
  const size_t per = std::max<size_t>(1, 16 / element_bytes);
  return (elements + per - 1) / per * per;
}

std::vector<size_t> offsets(std::span<const size_t> counts) {
  std::vector<size_t> at(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) at[i + 1] = at[i] + counts[i];
  return at;
}

std::vector<size_t> fused_slots(std::span<const size_t> counts, size_t element_bytes) {
  std::vector<size_t> slot(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i)
    slot[i + 1] = slot[i] + padded(counts[i], element_bytes);
  return slot;
}

TensorPart tensor_part(size_t count, size_t element_bytes, int ranks, int p) {
  const size_t part = padded((count + ranks - 1) / ranks, element_bytes);
  const size_t begin = std::min(count, static_cast<size_t>(p) * part);
  return {begin, std::min(count, begin + part) - begin};
}

size_t Round::part_begin(int p) const { return std::min(count, static_cast<size_t>(p) * part); }

size_t Round::part_length(int p) const {
  const size_t lo = part_begin(p);
  return std::min(count, lo + part) - lo;
}

std::vector<Piece> Round::part_pieces(int p) const {
  const size_t lo = part_begin(p);
  const size_t hi = lo + part_length(p);
  std::vector<Piece> out;
  for (const Piece& x : pieces) {
    const size_t a = std::max(lo, x.round_offset);
    const size_t b = std::min(hi, x.round_offset + x.count);
    if (b <= a) continue;
    out.push_back({x.tensor, x.tensor_offset + (a - x.round_offset), a, b - a});
  }
  return out;
}

std::vector<RingStep> ring_steps(int ranks, int me) {
  std::vector<RingStep> steps;
  auto wrap = [ranks](int p) { return ((p % ranks) + ranks) % ranks; };
  for (int s = 0; s < ranks - 1; ++s) steps.push_back({wrap(me - s - 1), true});
  for (int s = 0; s < ranks - 1; ++s) steps.push_back({wrap(me - s), false});
  return steps;
}

std::vector<Round> plan_rounds(std::span<const size_t> counts, size_t element_bytes, int ranks,
                               size_t round_bytes) {
  const std::vector<size_t> slot = fused_slots(counts, element_bytes);
  const size_t extent = slot.back();
  const size_t align = padded(1, element_bytes);  // elements per 16 bytes
  const size_t unit = align * static_cast<size_t>(ranks);
  const size_t per_round = std::max(unit, round_bytes / element_bytes / unit * unit);
  std::vector<Round> rounds;
  for (size_t off = 0; off < extent; off += per_round) {
    Round r;
    r.offset = off;
    r.count = std::min(per_round, extent - off);
    r.part = padded((r.count + ranks - 1) / ranks, element_bytes);
    for (size_t i = 0; i < counts.size(); ++i) {
      const size_t a = std::max(off, slot[i]);
      const size_t b = std::min(off + r.count, slot[i] + counts[i]);
      if (b > a) r.pieces.push_back({i, a - slot[i], a - off, b - a});
    }
    rounds.push_back(std::move(r));
  }
  return rounds;
}

}  // namespace ringlet::core::gpu
