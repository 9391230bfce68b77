// pack and unpack: many tensors into one fusion buffer and back, exactly with
// factor 1 (bit for bit, NaN payloads included) and scaled otherwise.
#include "reference.h"

namespace ringlet::kernels::test {
namespace {

class PackTest : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  IsaScope isa_{GetParam()};
  std::mt19937_64 rng_{7};
};

constexpr size_t kCounts[] = {0, 1, 7, 31, 1000, 0, 4097, 3};

TEST_P(PackTest, RoundTripIsExact) {
  for (DataType dtype : kAllDtypes) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    const size_t elem = dtype_size(dtype);
    std::vector<Buffer> tensors;
    std::vector<cpu::ConstSegment> in;
    size_t total = 0;
    for (size_t i = 0; i < std::size(kCounts); ++i) {
      tensors.emplace_back(kCounts[i] * elem, i % 3);
      fill_random(dtype, tensors.back().data(), kCounts[i], rng_);
      total += kCounts[i];
    }
    for (size_t i = 0; i < tensors.size(); ++i) in.push_back({tensors[i].data(), kCounts[i]});
    Buffer fused(total * elem, 1);
    ASSERT_EQ(cpu::pack(dtype, fused.data(), in), total);

    size_t offset = 0;
    std::vector<Buffer> outputs;
    std::vector<cpu::Segment> out;
    for (size_t i = 0; i < tensors.size(); ++i) {
      ASSERT_EQ(std::memcmp(fused.data() + offset * elem, tensors[i].data(), kCounts[i] * elem), 0);
      offset += kCounts[i];
      outputs.emplace_back(kCounts[i] * elem, 5);
    }
    for (size_t i = 0; i < outputs.size(); ++i) out.push_back({outputs[i].data(), kCounts[i]});
    ASSERT_EQ(cpu::unpack(dtype, fused.data(), out), total);
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(outputs[i].bytes(), tensors[i].bytes()) << "tensor " << i;
    }
  }
}

TEST_P(PackTest, ScalesOnTheWay) {
  for (DataType dtype : kAllDtypes) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    const size_t elem = dtype_size(dtype);
    std::vector<Buffer> tensors;
    std::vector<cpu::ConstSegment> in;
    size_t total = 0;
    for (size_t i = 0; i < std::size(kCounts); ++i) {
      tensors.emplace_back(kCounts[i] * elem, 0);
      fill_random(dtype, tensors.back().data(), kCounts[i], rng_);
      total += kCounts[i];
    }
    for (size_t i = 0; i < tensors.size(); ++i) in.push_back({tensors[i].data(), kCounts[i]});

    // pack(x, 0.25) is each tensor scaled by 0.25, as the scalar reference
    // (not the kernels under test) computes it, laid end to end.
    Buffer fused(total * elem, 0);
    ASSERT_EQ(cpu::pack(dtype, fused.data(), in, 0.25), total);
    size_t offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      Buffer expected(kCounts[i] * elem, 0);
      ref_scale_buffer(dtype, expected.data(), tensors[i].data(), kCounts[i], 0.25);
      EXPECT_TRUE(same_values(dtype, expected.data(), fused.data() + offset * elem, kCounts[i]))
          << "tensor " << i << " packed with factor 0.25";
      offset += kCounts[i];
    }

    // unpack(fused, 4) is each piece of the fused buffer scaled by 4, again
    // as the reference computes it.
    std::vector<Buffer> outputs;
    std::vector<cpu::Segment> out;
    for (size_t i = 0; i < tensors.size(); ++i) outputs.emplace_back(kCounts[i] * elem, 3);
    for (size_t i = 0; i < outputs.size(); ++i) out.push_back({outputs[i].data(), kCounts[i]});
    ASSERT_EQ(cpu::unpack(dtype, fused.data(), out, 4.0), total);
    offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      Buffer expected(kCounts[i] * elem, 0);
      ref_scale_buffer(dtype, expected.data(), fused.data() + offset * elem, kCounts[i], 4.0);
      EXPECT_TRUE(same_values(dtype, expected.data(), outputs[i].data(), kCounts[i]))
          << "tensor " << i << " unpacked with factor 4";
      offset += kCounts[i];
    }
  }
  // A concrete round trip with values that survive x0.25 x4 exactly.
  const float a[] = {1.5f, -8.0f, 1e30f};
  const float b[] = {3.0f};
  float fused[4];
  const cpu::ConstSegment in[] = {{a, 3}, {b, 1}};
  cpu::pack(DataType::kFloat32, fused, in, 0.25);
  EXPECT_EQ(fused[0], 0.375f);
  EXPECT_EQ(fused[3], 0.75f);
  float ra[3], rb[1];
  const cpu::Segment out[] = {{ra, 3}, {rb, 1}};
  cpu::unpack(DataType::kFloat32, fused, out, 4.0);
  EXPECT_EQ(std::vector<float>(ra, ra + 3), std::vector<float>(a, a + 3));
  EXPECT_EQ(rb[0], 3.0f);
}

INSTANTIATE_TEST_SUITE_P(Isa, PackTest, ::testing::ValuesIn(available_isas()),
                         [](const auto& info) { return std::string(cpu::to_string(info.param)); });

}  // namespace
}  // namespace ringlet::kernels::test
