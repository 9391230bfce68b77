// The fused message's layout and its rounds and parts, as Ringlet's own
// algorithm over CUDA IPC cuts them: every element of every tensor is packed
// once, at a distinct place, and unpacked once from exactly one part; parts
// start on 16 bytes and rounds stay within their bytes.
#include "core/gpu/round_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>
#include <vector>

namespace ringlet::core::gpu {
namespace {

TEST(RoundPlan, SlotsStartOn16Bytes) {
  EXPECT_EQ(padded(0, 4), 0u);
  EXPECT_EQ(padded(1, 4), 4u);
  EXPECT_EQ(padded(4, 4), 4u);
  EXPECT_EQ(padded(5, 2), 8u);
  EXPECT_EQ(padded(3, 8), 4u);
  EXPECT_EQ(padded(17, 1), 32u);
  const std::vector<size_t> counts = {1, 0, 7, 8};
  EXPECT_EQ(fused_slots(counts, 4), (std::vector<size_t>{0, 4, 4, 12, 20}));
}

TEST(RoundPlan, OffsetsAndChunks) {
  const std::vector<size_t> counts = {3, 0, 5};
  EXPECT_EQ(offsets(counts), (std::vector<size_t>{0, 3, 3, 8}));
  EXPECT_EQ(offsets(std::vector<size_t>{}), (std::vector<size_t>{0}));
  EXPECT_EQ(chunk(10, 0, 4), 4u);
  EXPECT_EQ(chunk(10, 8, 4), 2u);
  EXPECT_EQ(chunk(10, 10, 4), 0u);
  EXPECT_EQ(chunk(10, 12, 4), 0u);
}

// The direct allreduce's parts of one tensor: in order, each element in
// exactly one, each non-empty part starting on 16 bytes, none past the end.
TEST(RoundPlan, TensorPartsCoverTheTensorOnce) {
  for (size_t es : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    for (int ranks : {1, 2, 3, 4, 8}) {
      for (size_t count :
           {size_t{0}, size_t{1}, size_t{5}, size_t{17}, size_t{4096}, size_t{1000003}}) {
        SCOPED_TRACE("es " + std::to_string(es) + " ranks " + std::to_string(ranks) + " count " +
                     std::to_string(count));
        size_t next = 0;
        for (int p = 0; p < ranks; ++p) {
          const TensorPart part = tensor_part(count, es, ranks, p);
          EXPECT_EQ(part.begin, next);
          if (part.length > 0) {
            EXPECT_EQ(part.begin * es % 16, 0u);
          }
          next = part.begin + part.length;
          EXPECT_LE(next, count);
        }
        EXPECT_EQ(next, count);
      }
    }
  }
  EXPECT_EQ(tensor_part(10, 4, 2, 0).length, 8u);  // parts of whole 16-byte units
  EXPECT_EQ(tensor_part(10, 4, 2, 1).length, 2u);
}

// Checks one plan against the arithmetic it must follow.
void check_plan(const std::vector<size_t>& counts, size_t es, int ranks, size_t round_bytes) {
  const std::vector<Round> rounds = plan_rounds(counts, es, ranks, round_bytes);
  const std::vector<size_t> slot = fused_slots(counts, es);
  const size_t align = 16 / es;
  // (tensor, element) -> times packed / unpacked, and fused positions used.
  std::map<std::pair<size_t, size_t>, int> packed, unpacked;
  std::map<size_t, int> positions;
  size_t next = 0;
  for (const Round& r : rounds) {
    ASSERT_EQ(r.offset, next) << "rounds must follow each other";
    next += r.count;
    ASSERT_GT(r.count, 0u);
    EXPECT_LE(r.count * es, std::max(round_bytes, align * ranks * es));
    EXPECT_EQ(r.part % align, 0u) << "parts start on 16 bytes";
    size_t covered = 0;
    for (int p = 0; p < ranks; ++p) {
      EXPECT_EQ(r.part_begin(p) % align, 0u);
      EXPECT_EQ(r.part_begin(p), std::min(r.count, p * r.part));
      covered += r.part_length(p);
    }
    EXPECT_EQ(covered, r.count) << "the parts cover the round exactly";
    size_t last_end = 0;
    for (const Piece& x : r.pieces) {
      EXPECT_GE(x.round_offset, last_end) << "pieces sorted, not overlapping";
      last_end = x.round_offset + x.count;
      EXPECT_LE(last_end, r.count);
      EXPECT_EQ(r.offset + x.round_offset, slot[x.tensor] + x.tensor_offset);
      for (size_t e = 0; e < x.count; ++e) {
        ++packed[{x.tensor, x.tensor_offset + e}];
        ++positions[r.offset + x.round_offset + e];
      }
    }
    for (int p = 0; p < ranks; ++p) {
      const size_t lo = r.part_begin(p), hi = lo + r.part_length(p);
      for (const Piece& x : r.part_pieces(p)) {
        EXPECT_GE(x.round_offset, lo);
        EXPECT_LE(x.round_offset + x.count, hi) << "a part's piece stays in the part";
        EXPECT_EQ(r.offset + x.round_offset, slot[x.tensor] + x.tensor_offset);
        for (size_t e = 0; e < x.count; ++e) ++unpacked[{x.tensor, x.tensor_offset + e}];
      }
    }
  }
  EXPECT_EQ(next, slot.back()) << "the rounds cover the fused message";
  size_t elements = 0;
  for (size_t c : counts) elements += c;
  EXPECT_EQ(packed.size(), elements);
  EXPECT_EQ(unpacked.size(), elements);
  EXPECT_EQ(positions.size(), elements) << "every element has a place of its own";
  for (const auto& [at, n] : packed)
    ASSERT_EQ(n, 1) << "tensor " << at.first << " element " << at.second;
  for (const auto& [at, n] : unpacked)
    ASSERT_EQ(n, 1) << "tensor " << at.first << " element " << at.second;
}

TEST(RoundPlan, EveryElementPackedAndUnpackedOnce) {
  check_plan({1000003}, 4, 2, 1 << 20);               // one tensor, many rounds
  check_plan({5, 1, 4099, 0, 65536, 7}, 2, 3, 4096);  // small rounds, odd sizes
  check_plan({1, 1, 1}, 8, 4, 32 << 20);              // fewer elements than ranks
  check_plan({33}, 1, 4, 64);                         // round_bytes below one unit
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> counts(1 + rng() % 12);
    for (size_t& c : counts) c = rng() % 3000;
    const size_t es = size_t{1} << (rng() % 4);
    const int ranks = 2 + static_cast<int>(rng() % 3);
    check_plan(counts, es, ranks, 256 + rng() % 8192);
  }
}

TEST(RoundPlan, NothingToMoveHasNoRounds) {
  EXPECT_TRUE(plan_rounds(std::vector<size_t>{}, 4, 2, 4096).empty());
  EXPECT_TRUE(plan_rounds(std::vector<size_t>{0, 0}, 4, 2, 4096).empty());
}

}  // namespace
}  // namespace ringlet::core::gpu
