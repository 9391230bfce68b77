// fp16 and bf16 conversions: all 65536 16-bit patterns, every rounding tie
// between neighbouring 16-bit values, overflow and subnormals, random floats;
// scalar and block (F16C) paths against independent references.
#include <cfloat>

#include "reference.h"

namespace ringlet::kernels::test {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Floats that probe the rounding of float -> 16 bit: for each pair of
// neighbouring finite 16-bit values, the midpoint (a tie) and the floats on
// either side of it, in both signs; plus the overflow and underflow edges and
// random bit patterns.
std::vector<float> probe_floats(DataType dtype) {
  std::vector<float> probes;
  const uint16_t last_finite = dtype == DataType::kFloat16 ? 0x7bff : 0x7f7f;
  for (uint32_t h = 0; h <= last_finite; ++h) {
    const double lo = widen16(dtype, static_cast<uint16_t>(h));
    const double hi = h == last_finite
                          ? (dtype == DataType::kFloat16 ? 65536.0 : std::ldexp(1.0, 128))
                          : widen16(dtype, static_cast<uint16_t>(h + 1));
    const double mid_d = (lo + hi) / 2;  // exact in float for both formats
    if (mid_d > FLT_MAX) continue;
    const float mid = static_cast<float>(mid_d);
    for (float f : {from_bits(bits_of(mid) - 1), mid, from_bits(bits_of(mid) + 1),
                    static_cast<float>(lo)}) {
      probes.push_back(f);
      probes.push_back(-f);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {65504.0f, 65519.996f, 65520.0f, 65536.0f, FLT_MAX, inf, 0x1p-24f, 0x1p-25f,
                  0x1.000002p-25f, 0x1.8p-24f, 0x1p-14f, 0x1.ffcp-15f, FLT_MIN, FLT_TRUE_MIN,
                  0.0f}) {
    probes.push_back(f);
    probes.push_back(-f);
  }
  // NaNs: quiet, signalling, payloads in the kept and in the dropped bits.
  for (uint32_t u : {0x7fc00000u, 0x7f800001u, 0x7fa00000u, 0x7fbfffffu, 0x7fffe000u,
                     0xffc00001u, 0xff800100u}) {
    probes.push_back(from_bits(u));
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 1000000; ++i) probes.push_back(from_bits(static_cast<uint32_t>(rng())));
  return probes;
}

class HalfTest : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  IsaScope isa_{GetParam()};
};

TEST_P(HalfTest, HalfToFloatAllPatterns) {
  std::vector<uint16_t> all(65536 + 1);
  for (uint32_t h = 0; h < 65536; ++h) all[h + 1] = static_cast<uint16_t>(h);
  std::vector<float> block(all.size());
  // Offset by one element so the block path also runs unaligned.
  cpu::half_to_float(block.data() + 1, all.data() + 1, 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t expected = bits_of(ref_half_to_float(static_cast<uint16_t>(h)));
    ASSERT_EQ(bits_of(cpu::half_to_float(static_cast<uint16_t>(h))), expected) << std::hex << h;
    ASSERT_EQ(bits_of(block[h + 1]), expected) << "block, " << std::hex << h;
  }
}

TEST_P(HalfTest, HalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = cpu::float_to_half(cpu::half_to_float(static_cast<uint16_t>(h)));
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    // A NaN comes back quiet, payload kept.
    ASSERT_EQ(back, nan ? (h | 0x200) : h) << std::hex << h;
  }
}

TEST_P(HalfTest, FloatToHalfRounding) {
  const std::vector<float> probes = probe_floats(DataType::kFloat16);
  std::vector<uint16_t> block(probes.size());
  cpu::float_to_half(block.data(), probes.data(), probes.size());
  for (size_t i = 0; i < probes.size(); ++i) {
    const uint16_t expected = ref_float_to_half(probes[i]);
    ASSERT_EQ(cpu::float_to_half(probes[i]), expected) << std::hexfloat << probes[i];
    ASSERT_EQ(block[i], expected) << "block, " << std::hexfloat << probes[i];
  }
  EXPECT_EQ(cpu::float_to_half(65520.0f), 0x7c00);  // the tie above 65504 goes to Inf
  EXPECT_EQ(cpu::float_to_half(65519.996f), 0x7bff);
  EXPECT_EQ(cpu::float_to_half(0x1p-25f), 0x0000);  // tie between 0 and 2^-24: even
  EXPECT_EQ(cpu::float_to_half(0x1.8p-24f), 0x0002);  // tie between 1 and 2 units: even
  EXPECT_EQ(cpu::float_to_half(-0x1.000002p-25f), 0x8001);
}

TEST_P(HalfTest, BFloat16AllPatterns) {
  std::vector<uint16_t> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = static_cast<uint16_t>(b);
  std::vector<float> block(65536);
  cpu::bfloat16_to_float(block.data(), all.data(), 65536);
  for (uint32_t b = 0; b < 65536; ++b) {
    ASSERT_EQ(bits_of(cpu::bfloat16_to_float(static_cast<uint16_t>(b))), b << 16);
    ASSERT_EQ(bits_of(block[b]), b << 16);
    const bool nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
    ASSERT_EQ(cpu::float_to_bfloat16(block[b]), nan ? (b | 0x40) : b) << std::hex << b;
  }
}

TEST_P(HalfTest, FloatToBFloat16Rounding) {
  const std::vector<float> probes = probe_floats(DataType::kBFloat16);
  std::vector<uint16_t> block(probes.size() + 1);
  cpu::float_to_bfloat16(block.data() + 1, probes.data(), probes.size());
  for (size_t i = 0; i < probes.size(); ++i) {
    const uint16_t expected = ref_float_to_bfloat16(probes[i]);
    ASSERT_EQ(cpu::float_to_bfloat16(probes[i]), expected) << std::hexfloat << probes[i];
    ASSERT_EQ(block[i + 1], expected) << "block, " << std::hexfloat << probes[i];
  }
  EXPECT_EQ(cpu::float_to_bfloat16(FLT_MAX), 0x7f80);  // rounds up to Inf
  EXPECT_EQ(cpu::float_to_bfloat16(from_bits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(cpu::float_to_bfloat16(from_bits(0x3f818000)), 0x3f82);  // tie, odd goes up
  EXPECT_EQ(cpu::float_to_bfloat16(from_bits(0x7f800001)), 0x7fc0);  // sNaN made quiet
}

INSTANTIATE_TEST_SUITE_P(Isa, HalfTest, ::testing::ValuesIn(available_isas()),
                         [](const auto& info) { return std::string(cpu::to_string(info.param)); });

}  // namespace
}  // namespace ringlet::kernels::test
