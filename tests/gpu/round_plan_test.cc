// The fused message's layout and its rounds and parts, as Ringlet's own
// algorithm over CUDA IPC cuts them: every element of every tensor is packed
// once, at a distinct place, and unpacked once from exactly one part; parts
// start on 16 bytes and rounds stay within their bytes.
#include "core/gpu/round_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
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
  // Times each (tensor, element) is packed and unpacked, and each fused
  // position used: flat counters, since a map of a million entries is slow
  // under the sanitizers.
  std::vector<std::vector<int>> packed(counts.size()), unpacked(counts.size());
  for (size_t t = 0; t < counts.size(); ++t) {
    packed[t].assign(counts[t], 0);
    unpacked[t].assign(counts[t], 0);
  }
  std::vector<int> positions(slot.back(), 0);
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
      ASSERT_LT(x.tensor, counts.size());
      ASSERT_LE(x.tensor_offset + x.count, counts[x.tensor]);
      ASSERT_LE(r.offset + x.round_offset + x.count, positions.size());
      for (size_t e = 0; e < x.count; ++e) {
        ++packed[x.tensor][x.tensor_offset + e];
        ++positions[r.offset + x.round_offset + e];
      }
    }
    for (int p = 0; p < ranks; ++p) {
      const size_t lo = r.part_begin(p), hi = lo + r.part_length(p);
      for (const Piece& x : r.part_pieces(p)) {
        EXPECT_GE(x.round_offset, lo);
        EXPECT_LE(x.round_offset + x.count, hi) << "a part's piece stays in the part";
        EXPECT_EQ(r.offset + x.round_offset, slot[x.tensor] + x.tensor_offset);
        ASSERT_LT(x.tensor, counts.size());
        ASSERT_LE(x.tensor_offset + x.count, counts[x.tensor]);
        for (size_t e = 0; e < x.count; ++e) ++unpacked[x.tensor][x.tensor_offset + e];
      }
    }
  }
  EXPECT_EQ(next, slot.back()) << "the rounds cover the fused message";
  for (size_t t = 0; t < counts.size(); ++t) {
    for (size_t e = 0; e < counts[t]; ++e) {
      ASSERT_EQ(packed[t][e], 1) << "tensor " << t << " element " << e << " packed";
      ASSERT_EQ(unpacked[t][e], 1) << "tensor " << t << " element " << e << " unpacked";
    }
  }
  size_t elements = 0, used = 0;
  for (size_t c : counts) elements += c;
  for (int n : positions) {
    ASSERT_LE(n, 1) << "every element has a place of its own";
    used += n;
  }
  EXPECT_EQ(used, elements);
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

// Runs the ring's steps of `ranks` ranks in a random order that only keeps
// what the device protocol orders: a rank's own steps in turn, and its step
// t after its predecessor's step t - 1 (the pack for t = 0). Each rank
// stages 2^rank times a value, so a part that misses a rank's contribution,
// or counts one twice (read after a peer overwrote it, or before a peer
// reduced into it), has the wrong sum.
void check_ring(int ranks, std::mt19937& rng) {
  constexpr int kElements = 3;  // per part
  using Half = std::vector<std::vector<uint64_t>>;
  std::vector<Half> half(ranks, Half(ranks, std::vector<uint64_t>(kElements, 0)));
  std::vector<std::vector<RingStep>> steps(ranks);
  std::vector<int> done(ranks, 0);  // actions done: the pack, then the steps
  for (int r = 0; r < ranks; ++r) steps[r] = ring_steps(ranks, r);
  auto value = [](int p, int e) { return static_cast<uint64_t>(p * kElements + e + 1); };
  for (;;) {
    std::vector<int> ready;
    for (int r = 0; r < ranks; ++r) {
      const int prev = (r + ranks - 1) % ranks;
      if (done[r] == 0) {
        ready.push_back(r);
      } else if (done[r] - 1 < static_cast<int>(steps[r].size()) && done[prev] >= done[r]) {
        ready.push_back(r);
      }
    }
    if (ready.empty()) break;
    const int r = ready[rng() % ready.size()];
    const int prev = (r + ranks - 1) % ranks;
    if (done[r] == 0) {
      for (int p = 0; p < ranks; ++p)
        for (int e = 0; e < kElements; ++e) half[r][p][e] = (uint64_t{1} << r) * value(p, e);
    } else {
      const RingStep s = steps[r][done[r] - 1];
      for (int e = 0; e < kElements; ++e) {
        half[r][s.part][e] = half[prev][s.part][e] + (s.reduce ? half[r][s.part][e] : 0);
      }
    }
    ++done[r];
  }
  for (int r = 0; r < ranks; ++r) {
    ASSERT_EQ(done[r], 2 * ranks - 1) << "rank " << r << " ran every step";
    for (int p = 0; p < ranks; ++p)
      for (int e = 0; e < kElements; ++e)
        ASSERT_EQ(half[r][p][e], ((uint64_t{1} << ranks) - 1) * value(p, e))
            << ranks << " ranks: rank " << r << " part " << p;
  }
}

TEST(RoundPlan, RingStepsReduceEveryPartOnceInAnyOrderTheFlagsAllow) {
  EXPECT_TRUE(ring_steps(1, 0).empty());
  const std::vector<RingStep> two = ring_steps(2, 0);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_TRUE(two[0].reduce && two[0].part == 1) << "reduce the successor's part first";
  EXPECT_TRUE(!two[1].reduce && two[1].part == 0) << "then fetch the own part complete";
  std::mt19937 rng(11);
  for (int ranks = 1; ranks <= 6; ++ranks) {
    for (int trial = 0; trial < 200; ++trial) check_ring(ranks, rng);
  }
}

TEST(RoundPlan, NothingToMoveHasNoRounds) {
  EXPECT_TRUE(plan_rounds(std::vector<size_t>{}, 4, 2, 4096).empty());
  EXPECT_TRUE(plan_rounds(std::vector<size_t>{0, 0}, 4, 2, 4096).empty());
}

}  // namespace
}  // namespace ringlet::core::gpu
