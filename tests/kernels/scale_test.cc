// scale and finish_average: float multiplication in the documented precision,
// integer rounding (nearest, ties to even) and saturation, averages that
// divide integers toward zero.
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

class ScaleTest : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  IsaScope isa_{GetParam()};
  std::mt19937_64 rng_{42};
};

TEST_P(ScaleTest, EveryDtypeMatchesReference) {
  for (DataType dtype : kAllDtypes) {
    for (double factor : {0.5, -1.0, 3.0, 1.0 / 3.0, 1e-3, 0.0}) {
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

TEST_P(ScaleTest, IntegersRoundToNearestEvenAndSaturate) {
  int32_t v[] = {3, 5, -3, -5, 7, 2000000000, -2000000000};
  cpu::scale(DataType::kInt32, v, 7, 0.5);
  EXPECT_EQ(v[0], 2);   // 1.5 -> 2
  EXPECT_EQ(v[1], 2);   // 2.5 -> 2
  EXPECT_EQ(v[2], -2);  // -1.5 -> -2
  EXPECT_EQ(v[3], -2);
  EXPECT_EQ(v[4], 4);   // 3.5 -> 4
  int32_t w[] = {2000000000, -2000000000};
  cpu::scale(DataType::kInt32, w, 2, 2.0);
  EXPECT_EQ(w[0], INT32_MAX);
  EXPECT_EQ(w[1], INT32_MIN);
  int8_t b[] = {100, -100, 1};
  cpu::scale(DataType::kInt8, b, 3, 2.0);
  EXPECT_EQ(b[0], 127);
  EXPECT_EQ(b[1], -128);
  EXPECT_EQ(b[2], 2);
  uint8_t u[] = {10, 200};
  cpu::scale(DataType::kUInt8, u, 2, -1.0);
  EXPECT_EQ(u[0], 0);
  EXPECT_EQ(u[1], 0);
  int64_t l[] = {INT64_MAX / 2 + 1, INT64_MIN / 2 - 4096};
  cpu::scale(DataType::kInt64, l, 2, 4.0);
  EXPECT_EQ(l[0], INT64_MAX);
  EXPECT_EQ(l[1], INT64_MIN);
  int32_t z[] = {5};
  cpu::scale(DataType::kInt32, z, 1, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(z[0], 0);
}

TEST_P(ScaleTest, FinishAverageIntegersTowardZero) {
  int32_t v[] = {7, -7, 8, -8, -1, 1, INT32_MIN};
  cpu::finish_average(DataType::kInt32, v, 7, 2);
  const int32_t expected[] = {3, -3, 4, -4, 0, 0, INT32_MIN / 2};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(v[i], expected[i]) << i;
  int8_t b[] = {-128, 127, -5};
  cpu::finish_average(DataType::kInt8, b, 3, 3);
  EXPECT_EQ(b[0], -42);
  EXPECT_EQ(b[1], 42);
  EXPECT_EQ(b[2], -1);
  uint8_t u[] = {255, 3};
  cpu::finish_average(DataType::kUInt8, u, 2, 4);
  EXPECT_EQ(u[0], 63);
  EXPECT_EQ(u[1], 0);
  int64_t l[] = {INT64_MIN, -9};
  cpu::finish_average(DataType::kInt64, l, 2, 4);
  EXPECT_EQ(l[0], INT64_MIN / 4);
  EXPECT_EQ(l[1], -2);
}

TEST_P(ScaleTest, FinishAverageFloatsMultiplyByInverse) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                         DataType::kBFloat16}) {
    for (int n : {1, 2, 3, 7}) {
      const size_t count = 1001;
      const size_t bytes = count * dtype_size(dtype);
      Buffer buf(bytes, 2), expected(bytes, 0);
      fill_random(dtype, buf.data(), count, rng_);
      ref_scale_buffer(dtype, expected.data(), buf.data(), count, 1.0 / n);
      cpu::finish_average(dtype, buf.data(), count, n);
      EXPECT_TRUE(same_values(dtype, expected.data(), buf.data(), count))
          << to_string(dtype) << " n=" << n;
    }
  }
  float f[] = {3.0f};
  cpu::finish_average(DataType::kFloat32, f, 1, 4);
  EXPECT_EQ(f[0], 0.75f);
}

TEST_P(ScaleTest, FinishAverageRejectsNoContributors) {
  float f[1] = {1};
  EXPECT_THROW(cpu::finish_average(DataType::kFloat32, f, 1, 0), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Isa, ScaleTest, ::testing::ValuesIn(available_isas()),
                         [](const auto& info) { return std::string(cpu::to_string(info.param)); });

}  // namespace
}  // namespace ringlet::kernels::test
