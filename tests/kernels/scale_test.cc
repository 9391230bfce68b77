// scale: float multiplication in the documented precision, integers
// multiplied in double and truncated toward zero (Horovod's ScaleBuffer), with
// saturation and NaN -> 0 where C++ leaves the conversion undefined; and the
// result's one factor, by which an average's sum is scaled once.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "reference.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::kernels::test {
namespace {

// The saturation bounds are derived from the type's width; they must be the
// host's numeric limits for every integer element type.
template <class T>
constexpr bool range_is_the_limits() {
  return ops::IntRange<T>::kMin == std::numeric_limits<T>::min() &&
         ops::IntRange<T>::kMax == std::numeric_limits<T>::max();
}
static_assert(range_is_the_limits<int8_t>() && range_is_the_limits<uint8_t>() &&
              range_is_the_limits<int16_t>() && range_is_the_limits<uint16_t>() &&
              range_is_the_limits<int32_t>() && range_is_the_limits<int64_t>());

constexpr DataType kIntegerDtypes[] = {DataType::kInt8,   DataType::kUInt8, DataType::kInt16,
                                       DataType::kUInt16, DataType::kInt32, DataType::kInt64};

class ScaleTest : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  IsaScope isa_{GetParam()};
  std::mt19937_64 rng_{42};
};

TEST_P(ScaleTest, EveryDtypeMatchesReference) {
  for (DataType dtype : kAllDtypes) {
    for (double factor : {0.5, -1.0, 3.0, 1.0 / 3.0, 1e-3, 0.0, 1.5, 2.5, 0.7, -2.5}) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{1025}, size_t{100003}}) {
        SCOPED_TRACE(std::string(to_string(dtype)) + " factor=" + std::to_string(factor) +
                     " n=" + std::to_string(n));
        const size_t bytes = n * dtype_size(dtype);
        Buffer buf(bytes, 1), expected(bytes, 0);
        fill_random(dtype, buf.data(), n, rng_);
        ref_scale_buffer(dtype, expected.data(), buf.data(), n, factor);
        cpu::scale(dtype, buf.data(), n, factor);
        ASSERT_TRUE(same_values(dtype, expected.data(), buf.data(), n));
      }
    }
  }
}

// Small integers of both signs, where truncation and rounding part ways on
// nearly every element: a vector body and a scalar tail for every type (1027
// elements), at an odd address, against math written out here: the product
// in double with the fraction dropped.
TEST_P(ScaleTest, IntegersTruncateTowardZeroOnBothPaths) {
  for (DataType dtype : kIntegerDtypes) {
    for (double factor : {0.5, 1.5, 2.5, 1.0 / 3.0, 0.7, -0.5, -2.5, 0.999}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " factor=" + std::to_string(factor));
      const size_t n = 1027, es = dtype_size(dtype);
      const bool is_signed = dtype != DataType::kUInt8 && dtype != DataType::kUInt16;
      Buffer buf(n * es, 3);
      std::vector<double> want(n);
      for (size_t i = 0; i < n; ++i) {
        const int64_t x =
            is_signed ? static_cast<int64_t>(i % 101) - 50 : static_cast<int64_t>(i % 101);
        std::memcpy(buf.data() + i * es, &x, es);  // little endian: the low bytes
        const double p = static_cast<double>(x) * factor;
        want[i] = std::trunc(p);
        if (!is_signed && want[i] < 0) want[i] = 0;  // below uint's range
      }
      cpu::scale(dtype, buf.data(), n, factor);
      for (size_t i = 0; i < n; ++i) {
        int64_t got = 0;
        std::memcpy(&got, buf.data() + i * es, es);
        if (is_signed && es < 8) got = (got << (64 - 8 * es)) >> (64 - 8 * es);  // sign-extend
        ASSERT_EQ(static_cast<double>(got), want[i]) << "element " << i;
      }
    }
  }
}

TEST_P(ScaleTest, IntegersTruncateAndSaturate) {
  int32_t v[] = {3, 5, -3, -5, 7, 11, -11};
  cpu::scale(DataType::kInt32, v, 7, 0.5);
  EXPECT_EQ(v[0], 1);   // 1.5 -> 1
  EXPECT_EQ(v[1], 2);   // 2.5 -> 2
  EXPECT_EQ(v[2], -1);  // -1.5 -> -1
  EXPECT_EQ(v[3], -2);  // -2.5 -> -2
  EXPECT_EQ(v[4], 3);   // 3.5 -> 3
  EXPECT_EQ(v[5], 5);   // 5.5 -> 5
  EXPECT_EQ(v[6], -5);  // -5.5 -> -5
  int32_t t[] = {11, 19};
  cpu::scale(DataType::kInt32, t, 2, 2.5);
  EXPECT_EQ(t[0], 27);  // 27.5: rounding to nearest even gave 28
  EXPECT_EQ(t[1], 47);  // 47.5: rounding gave 48
  // 0.7 is just under 7/10 in double: 10 * 0.7 is 7 exactly, 3 * 0.7 is 2.0999...
  int16_t s[] = {10, 3, -3};
  cpu::scale(DataType::kInt16, s, 3, 0.7);
  EXPECT_EQ(s[0], 7);
  EXPECT_EQ(s[1], 2);
  EXPECT_EQ(s[2], -2);
  int32_t w[] = {2000000000, -2000000000};
  cpu::scale(DataType::kInt32, w, 2, 2.0);
  EXPECT_EQ(w[0], INT32_MAX);
  EXPECT_EQ(w[1], INT32_MIN);
  int8_t b[] = {100, -100, 1, 127, -128};
  cpu::scale(DataType::kInt8, b, 5, 2.0);
  EXPECT_EQ(b[0], 127);
  EXPECT_EQ(b[1], -128);
  EXPECT_EQ(b[2], 2);
  EXPECT_EQ(b[3], 127);
  EXPECT_EQ(b[4], -128);
  int8_t edge[] = {127, -128};
  cpu::scale(DataType::kInt8, edge, 2, 1.005);  // 127.635 and -128.64: past the range by < 1
  EXPECT_EQ(edge[0], 127);
  EXPECT_EQ(edge[1], -128);
  uint8_t u[] = {10, 200, 255};
  cpu::scale(DataType::kUInt8, u, 3, -1.0);
  EXPECT_EQ(u[0], 0);
  EXPECT_EQ(u[1], 0);
  EXPECT_EQ(u[2], 0);
  uint16_t u16[] = {3, 65535};
  cpu::scale(DataType::kUInt16, u16, 2, 1.5);
  EXPECT_EQ(u16[0], 4);  // 4.5 -> 4
  EXPECT_EQ(u16[1], 65535);
  int64_t l[] = {INT64_MAX / 2 + 1, INT64_MIN / 2 - 4096, -7, 7};
  cpu::scale(DataType::kInt64, l, 4, 4.0);
  EXPECT_EQ(l[0], INT64_MAX);
  EXPECT_EQ(l[1], INT64_MIN);
  EXPECT_EQ(l[2], -28);
  EXPECT_EQ(l[3], 28);
  int64_t h[] = {-7, 7, int64_t{1} << 53};
  cpu::scale(DataType::kInt64, h, 3, 0.5);
  EXPECT_EQ(h[0], -3);
  EXPECT_EQ(h[1], 3);
  EXPECT_EQ(h[2], int64_t{1} << 52);
  int32_t z[] = {5};
  cpu::scale(DataType::kInt32, z, 1, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(z[0], 0);
  int64_t z64[] = {5};
  cpu::scale(DataType::kInt64, z64, 1, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(z64[0], 0);
}

TEST_P(ScaleTest, FloatsMultiplyOnceInTheirComputeType) {
  // float32: the factor rounded to float, one float product.
  float f[] = {3.0f, 10.0f};
  cpu::scale(DataType::kFloat32, f, 2, 0.1);
  EXPECT_EQ(f[0], 3.0f * 0.1f);
  EXPECT_EQ(f[1], 10.0f * 0.1f);
  // float64: the factor as it is.
  double d[] = {3.0};
  cpu::scale(DataType::kFloat64, d, 1, 0.1);
  EXPECT_EQ(d[0], 3.0 * 0.1);
}

TEST(ResultScale, AnAverageJoinsItsDivisionToThePostscale) {
  EXPECT_EQ(ops::result_scale(ReduceOp::kAvg, 1.0, 4), 0.25);
  EXPECT_EQ(ops::result_scale(ReduceOp::kAvg, 3.0, 2), 1.5);
  EXPECT_EQ(ops::result_scale(ReduceOp::kAvg, 3.0, 3), 1.0);  // no scaling at all
  EXPECT_EQ(ops::result_scale(ReduceOp::kAvg, 1.0, 3), 1.0 / 3);
  EXPECT_EQ(ops::result_scale(ReduceOp::kAvg, 0.7, 3), 0.7 / 3);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
    EXPECT_EQ(ops::result_scale(op, 2.5, 3), 2.5);
  }
}

// An average is the sum scaled once by postscale / n: integers truncate
// sum * (post / n), which a division toward zero followed by the postscale
// does not give. Sums here are the integer dtypes' sums over n ranks.
TEST_P(ScaleTest, AverageIsTheSumScaledOnce) {
  struct Case {
    int64_t sum;
    int ranks;
    double postscale;
    int64_t want;  // Horovod's: trunc(sum * (postscale / ranks)) in double
  };
  const Case cases[] = {
      {19, 2, 3.0, 28},    // 28.5; dividing first gave 9 * 3 = 27
      {-19, 2, 3.0, -28},  // toward zero on the negative side too
      {20, 3, 1.5, 10},    // dividing first gave 6 * 1.5 = 9
      {10, 3, 0.7, 2},     // 10 * 0.2333... = 2.333
      {49, 49, 1.0, 0},    // 49 * (1/49) is 0.99999999999999989 in double
      {-7, 2, 1.0, -3},    // -3.5
      {7, 3, 3.0, 7},      // 3 / 3 is 1.0: no scaling, the sum itself
  };
  for (const Case& c : cases) {
    const double factor = ops::result_scale(ReduceOp::kAvg, c.postscale, c.ranks);
    const double independent = std::trunc(static_cast<double>(c.sum) * (c.postscale / c.ranks));
    ASSERT_EQ(static_cast<double>(c.want), independent) << c.sum;  // the table itself
    for (DataType dtype : kIntegerDtypes) {
      const bool is_signed = dtype != DataType::kUInt8 && dtype != DataType::kUInt16;
      if (!is_signed && c.sum < 0) continue;
      // Enough copies for the vector path, plus a tail.
      const size_t n = 67, es = dtype_size(dtype);
      std::vector<unsigned char> buf(n * es);
      for (size_t i = 0; i < n; ++i) std::memcpy(buf.data() + i * es, &c.sum, es);
      cpu::scale(dtype, buf.data(), n, factor);
      for (size_t i = 0; i < n; ++i) {
        int64_t got = 0;
        std::memcpy(&got, buf.data() + i * es, es);
        if (is_signed && es < 8) got = (got << (64 - 8 * es)) >> (64 - 8 * es);
        ASSERT_EQ(got, c.want) << to_string(dtype) << " sum " << c.sum << " over " << c.ranks
                               << " post " << c.postscale << " element " << i;
      }
    }
  }
}

TEST_P(ScaleTest, FloatAverageIsOneProductByTheJoinedFactor) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                         DataType::kBFloat16}) {
    for (int n : {1, 2, 3, 7}) {
      for (double post : {1.0, 1.5, 0.7}) {
        const size_t count = 1001;
        const size_t bytes = count * dtype_size(dtype);
        Buffer buf(bytes, 2), expected(bytes, 0);
        fill_random(dtype, buf.data(), count, rng_);
        ref_finish(dtype, ReduceOp::kAvg, expected.data(), buf.data(), count, n, post);
        cpu::scale(dtype, buf.data(), count, ops::result_scale(ReduceOp::kAvg, post, n));
        EXPECT_TRUE(same_values(dtype, expected.data(), buf.data(), count))
            << to_string(dtype) << " n=" << n << " post=" << post;
      }
    }
  }
  // 5 x 0.7 / 3 in float: one product by the float nearest 0.7/3 gives
  // 1.1666666; the sum x (1/3 in float), then x (0.7 in float), rounds twice,
  // to 1.1666667.
  float f[] = {5.0f};
  cpu::scale(DataType::kFloat32, f, 1, ops::result_scale(ReduceOp::kAvg, 0.7, 3));
  EXPECT_EQ(f[0], 5.0f * static_cast<float>(0.7 / 3));
  EXPECT_NE(f[0], 5.0f * static_cast<float>(1.0 / 3) * 0.7f);
}

INSTANTIATE_TEST_SUITE_P(Isa, ScaleTest, ::testing::ValuesIn(available_isas()),
                         [](const auto& info) { return std::string(cpu::to_string(info.param)); });

}  // namespace
}  // namespace ringlet::kernels::test
