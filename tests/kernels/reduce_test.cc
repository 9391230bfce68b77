// reduce and reduce_many: every dtype x op on both ISA paths, against the
// scalar reference, at odd lengths, unaligned, in place and streamed.
#include <array>
#include <stdexcept>
#include <tuple>

#include "reference.h"
#include "tests/common/throws_failure.h"

namespace ringlet::kernels::test {
namespace {

using Param = std::tuple<DataType, ReduceOp, cpu::Isa>;

constexpr size_t kLengths[] = {0, 1, 7, 31, 257, 1000, 4099};
constexpr size_t kLarge = 1000003;

class ReduceTest : public ::testing::TestWithParam<Param> {
 protected:
  DataType dtype() const { return std::get<0>(GetParam()); }
  ReduceOp op() const { return std::get<1>(GetParam()); }
  size_t elem() const { return dtype_size(dtype()); }

  IsaScope isa_{std::get<2>(GetParam())};
  std::mt19937_64 rng_{0x5eed0000u + static_cast<unsigned>(dtype()) * 16 +
                       static_cast<unsigned>(op())};
};

// Runs reduce on (a, b) at the given misalignments and checks it against the
// reference: out of place, in place on a, in place on b, with both store kinds.
void check_reduce(DataType dtype, ReduceOp op, size_t n, size_t misalign, std::mt19937_64& rng) {
  const size_t bytes = n * dtype_size(dtype);
  Buffer a(bytes, misalign), b(bytes, (misalign * 3) % 64), out(bytes, (misalign * 7) % 64);
  fill_random(dtype, a.data(), n, rng);
  fill_random(dtype, b.data(), n, rng);
  Buffer expected(bytes, 0);
  ref_reduce(dtype, op, expected.data(), a.data(), b.data(), n);

  for (cpu::Store store : {cpu::Store::kNormal, cpu::Store::kStream}) {
    SCOPED_TRACE(store == cpu::Store::kStream ? "stream" : "normal");
    cpu::reduce(dtype, op, out.data(), a.data(), b.data(), n, store);
    EXPECT_TRUE(same_values(dtype, expected.data(), out.data(), n)) << "out of place";

    Buffer in_a(bytes, misalign);
    std::memcpy(in_a.data(), a.data(), bytes);
    cpu::reduce(dtype, op, in_a.data(), in_a.data(), b.data(), n, store);
    EXPECT_TRUE(same_values(dtype, expected.data(), in_a.data(), n)) << "in place on a";

    Buffer in_b(bytes, misalign);
    std::memcpy(in_b.data(), b.data(), bytes);
    cpu::reduce(dtype, op, in_b.data(), a.data(), in_b.data(), n, store);
    EXPECT_TRUE(same_values(dtype, expected.data(), in_b.data(), n)) << "in place on b";
  }
}

TEST_P(ReduceTest, MatchesReference) {
  for (size_t n : kLengths) {
    for (size_t misalign : {0, 1, 4, 8, 36}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " misalign=" + std::to_string(misalign));
      check_reduce(dtype(), op(), n, misalign, rng_);
    }
  }
}

TEST_P(ReduceTest, MatchesReferenceLarge) {
  SCOPED_TRACE("n=" + std::to_string(kLarge));
  check_reduce(dtype(), op(), kLarge, elem(), rng_);
}

// reduce_many: agrees with the reference left fold in input order; with two
// inputs it is reduce exactly. Each input position is also tried as the
// in-place output.
TEST_P(ReduceTest, ReduceManyMatchesFold) {
  const bool is16 = dtype() == DataType::kFloat16 || dtype() == DataType::kBFloat16;
  for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{1000}, size_t{70001}}) {
    for (size_t k = 1; k <= 5; ++k) {
      SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
      const size_t bytes = n * elem();
      std::vector<Buffer> inputs;
      std::vector<const void*> pointers;
      for (size_t j = 0; j < k; ++j) {
        inputs.emplace_back(bytes, (j * 5) % 64);
        fill_random(dtype(), inputs.back().data(), n, rng_);
      }
      for (auto& in : inputs) pointers.push_back(in.data());

      // Expected: a fold of reduce() for native types; for fp16/bf16 a fold
      // in float with one rounding at the end (see cpu.h).
      Buffer expected(bytes, 0);
      if (!is16) {
        std::memcpy(expected.data(), inputs[0].data(), bytes);
        for (size_t j = 1; j < k; ++j) {
          ref_reduce(dtype(), op(), expected.data(), expected.data(), inputs[j].data(), n);
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          auto at = [&](size_t j) {
            uint16_t v;
            std::memcpy(&v, inputs[j].data() + 2 * i, 2);
            return widen16(dtype(), v);
          };
          float acc = at(0);
          for (size_t j = 1; j < k; ++j) acc = ref_op(op(), acc, at(j));
          const uint16_t r = narrow16(dtype(), acc);
          std::memcpy(expected.data() + 2 * i, &r, 2);
        }
      }

      for (cpu::Store store : {cpu::Store::kNormal, cpu::Store::kStream}) {
        Buffer out(bytes, 3);
        cpu::reduce_many(dtype(), op(), out.data(), pointers, n, store);
        EXPECT_TRUE(same_values(dtype(), expected.data(), out.data(), n));
        if (k == 2) {
          Buffer pair(bytes, 0);
          cpu::reduce(dtype(), op(), pair.data(), pointers[0], pointers[1], n, store);
          EXPECT_TRUE(same_values(dtype(), pair.data(), out.data(), n)) << "reduce vs reduce_many";
        }
        for (size_t alias = 0; alias < k; ++alias) {
          SCOPED_TRACE("out aliases input " + std::to_string(alias));
          Buffer copy(bytes, (alias * 5) % 64);
          std::memcpy(copy.data(), inputs[alias].data(), bytes);
          std::vector<const void*> aliased = pointers;
          aliased[alias] = copy.data();
          cpu::reduce_many(dtype(), op(), copy.data(), aliased, n, store);
          EXPECT_TRUE(same_values(dtype(), expected.data(), copy.data(), n));
        }
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(to_string(std::get<0>(info.param))) + "_" +
         std::string(to_string(std::get<1>(info.param))) + "_" +
         std::string(cpu::to_string(std::get<2>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllDtypesOps, ReduceTest,
                         ::testing::Combine(::testing::ValuesIn(kAllDtypes),
                                            ::testing::ValuesIn(kAllOps),
                                            ::testing::ValuesIn(available_isas())),
                         param_name);

// Spot checks of the documented semantics, independent of random data.
TEST(ReduceSemantics, FloatMinMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float a[] = {nan, 1.0f, nan, -0.0f, 2.0f};
  const float b[] = {1.0f, nan, nan, 0.0f, -std::numeric_limits<float>::infinity()};
  for (cpu::Isa isa : available_isas()) {
    IsaScope scope(isa);
    float mn[5], mx[5];
    cpu::reduce(DataType::kFloat32, ReduceOp::kMin, mn, a, b, 5);
    cpu::reduce(DataType::kFloat32, ReduceOp::kMax, mx, a, b, 5);
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(std::isnan(mn[i])) << i;
      EXPECT_TRUE(std::isnan(mx[i])) << i;
    }
    EXPECT_EQ(mn[4], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(mx[4], 2.0f);
  }
}

TEST(ReduceSemantics, IntegerSumAndProductWrap) {
  const int8_t a[] = {127, -128, 100, -1};
  const int8_t b[] = {1, -1, 3, 127};
  int8_t sum[4], prod[4];
  cpu::reduce(DataType::kInt8, ReduceOp::kSum, sum, a, b, 4);
  cpu::reduce(DataType::kInt8, ReduceOp::kProd, prod, a, b, 4);
  EXPECT_EQ(sum[0], -128);
  EXPECT_EQ(sum[1], 127);
  EXPECT_EQ(prod[2], 44);  // 300 mod 256
  EXPECT_EQ(prod[3], -127);
  const int64_t big[] = {INT64_MAX};
  const int64_t one[] = {1};
  int64_t out[1];
  cpu::reduce(DataType::kInt64, ReduceOp::kSum, out, big, one, 1);
  EXPECT_EQ(out[0], INT64_MIN);
}

// A caller's bad argument is the library's one failure type, of the kind
// that says "fix the call", naming what was wrong.
TEST(ReduceSemantics, InvalidArgumentsAreInvalidArgumentFailures) {
  using ringlet::test::throws_failure;
  constexpr auto kInvalid = common::FailureKind::kInvalidArgument;
  float x[1] = {0};
  EXPECT_TRUE(throws_failure(
      kInvalid, [&] { cpu::reduce(static_cast<DataType>(99), ReduceOp::kSum, x, x, x, 1); }));
  EXPECT_TRUE(throws_failure(
      kInvalid, [&] { cpu::reduce(DataType::kFloat32, static_cast<ReduceOp>(99), x, x, x, 1); }));
  EXPECT_TRUE(throws_failure(
      kInvalid, [&] { cpu::reduce_many(DataType::kFloat32, ReduceOp::kSum, x, {}, 1); }));
  try {
    cpu::reduce(static_cast<DataType>(99), ReduceOp::kSum, x, x, x, 1);
  } catch (const common::Failure& f) {
    EXPECT_EQ(f.cause(), "kernels: invalid dtype 99");
  }
}

}  // namespace
}  // namespace ringlet::kernels::test
