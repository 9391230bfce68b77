// The soak's reference, checked by hand-computed cases: a reference that is
// wrong in the same way as the library would let both pass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "plan.h"
#include "reference.h"
#include "values.h"

namespace soak {
namespace {

TEST(SoakValues, HalfCodecMatchesKnownBits) {
  EXPECT_EQ(double_to_half(1.0), 0x3c00);
  EXPECT_EQ(double_to_half(-2.0), 0xc000);
  EXPECT_EQ(double_to_half(65504.0), 0x7bff);
  EXPECT_EQ(double_to_half(1e6), 0x7c00);
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(double_to_half(2047.0), 0x67ff);
  EXPECT_EQ(double_to_half(2049.0), 0x6800);  // a tie rounds to even: 2048
  EXPECT_EQ(half_to_double(0x3555), 0.333251953125);
  EXPECT_EQ(half_to_double(0x8001), -std::ldexp(1.0, -24));
  for (int v = -2048; v <= 2048; ++v) ASSERT_EQ(half_to_double(double_to_half(v)), v);
}

TEST(SoakValues, BFloat16CodecMatchesKnownBits) {
  EXPECT_EQ(double_to_bf16(1.0), 0x3f80);
  EXPECT_EQ(double_to_bf16(-3.0), 0xc040);
  EXPECT_EQ(double_to_bf16(257.0), 0x4380);  // a tie rounds to even: 256
  EXPECT_EQ(bf16_to_double(0x4049), 3.140625);
  for (int v = -256; v <= 256; ++v) ASSERT_EQ(bf16_to_double(double_to_bf16(v)), v);
}

TEST(SoakValues, InputsStayInRangeAndDifferByRank) {
  const Range r = value_range(DataType::kInt8, ReduceOp::kSum);
  int same = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const int64_t a = input_value(7, 0, i, r), b = input_value(7, 1, i, r);
    ASSERT_GE(a, r.lo);
    ASSERT_LE(a, r.hi);
    same += a == b;
  }
  EXPECT_LT(same, 2000);  // about 1 in 15 by chance
}

Collective world(Kind kind, DataType t, int members) {
  Collective c;
  c.kind = kind;
  c.dtype = t;
  c.seed = 42;
  for (int r = 0; r < members; ++r) c.members.push_back(r);
  return c;
}

std::vector<double> inputs_of(const Collective& c, int rank, size_t n) {
  std::vector<double> v(n);
  input_values(c, 0, rank, 0, n, v.data());
  return v;
}

std::vector<double> output_of(const Expected& x) {
  std::vector<double> v(x.elements);
  x.values(0, v.size(), v.data());
  return v;
}

TEST(SoakReference, IntegerAverageIsTheSumScaledOnce) {
  Collective c = world(Kind::kAllreduce, DataType::kInt32, 3);
  c.op = ReduceOp::kAvg;
  c.prescale = 2.0;
  c.postscale = 2.0;
  c.rows = {5};
  const Expected x(c, 0, 1);
  const auto out = output_of(x);
  for (size_t e = 0; e < 5; ++e) {
    int64_t sum = 0;
    for (int r = 0; r < 3; ++r) sum += 2 * static_cast<int64_t>(inputs_of(c, r, 5)[e]);
    // Horovod's rule: the sum times postscale / size in double, toward zero.
    EXPECT_EQ(out[e], std::trunc(static_cast<double>(sum) * (2.0 / 3))) << e;
  }
}

TEST(SoakReference, AllgatherConcatenatesMembersWithTheirOwnRows) {
  Collective c = world(Kind::kAllgather, DataType::kFloat32, 3);
  c.rows = {2, 0, 1};
  c.width = 2;
  const Expected x(c, 0, 2);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{3, 2}));
  const auto out = output_of(x);
  const auto r0 = inputs_of(c, 0, 4), r2 = inputs_of(c, 2, 2);
  EXPECT_EQ(out, (std::vector<double>{r0[0], r0[1], r0[2], r0[3], r2[0], r2[1]}));
}

TEST(SoakReference, AlltoallTakesEachSendersRowsForThisRank) {
  Collective c = world(Kind::kAlltoall, DataType::kInt64, 2);
  c.splits = {{1, 2}, {3, 1}};  // rank 0 sends 1 row to 0 and 2 to 1; rank 1 3 and 1
  c.rows = {3, 4};
  const Expected x(c, 0, 1);
  EXPECT_EQ(x.received_splits, (std::vector<int64_t>{2, 1}));
  const auto out = output_of(x);
  const auto r0 = inputs_of(c, 0, 3), r1 = inputs_of(c, 1, 4);
  EXPECT_EQ(out, (std::vector<double>{r0[1], r0[2], r1[3]}));
}

TEST(SoakReference, ReducescatterSplitsRowsAsHorovodDoes) {
  Collective c = world(Kind::kReducescatter, DataType::kFloat64, 3);
  c.op = ReduceOp::kMax;
  c.rows = {7};  // 3, 2, 2 rows
  const Expected x(c, 0, 1);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{2, 1}));
  const auto out = output_of(x);
  for (size_t e = 0; e < 2; ++e) {
    double m = -1e300;
    for (int r = 0; r < 3; ++r) m = std::max(m, inputs_of(c, r, 7)[3 + e]);
    EXPECT_EQ(out[e], m);
  }
}

TEST(SoakReference, FloatAveragesGetATolerance) {
  Collective c = world(Kind::kAllreduce, DataType::kFloat16, 3);
  c.op = ReduceOp::kAvg;
  EXPECT_TRUE(close_enough(c, 10.0 / 3, half_to_double(double_to_half(10.0 / 3))));
  EXPECT_FALSE(close_enough(c, 10.0 / 3, 4.0));
  c.op = ReduceOp::kSum;
  EXPECT_FALSE(close_enough(c, 10.0, 10.0078125));  // sums are exact
}

}  // namespace
}  // namespace soak
