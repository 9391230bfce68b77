// copy: streaming and normal stores give the same bytes at every alignment of
// source and destination, and touch nothing outside the destination.
#include "reference.h"

namespace ringlet::kernels::test {
namespace {

class CopyTest : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  IsaScope isa_{GetParam()};
  std::mt19937_64 rng_{99};
};

TEST_P(CopyTest, EveryAlignmentAndLength) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{33}, size_t{127},
                       size_t{128}, size_t{129}, size_t{300}, size_t{4099}}) {
    for (size_t src_off = 0; src_off < 64; src_off += 7) {
      for (size_t dst_off = 0; dst_off < 64; ++dst_off) {
        Buffer src(bytes, src_off);
        fill_random(DataType::kUInt8, src.data(), bytes, rng_);
        for (cpu::Store store : {cpu::Store::kNormal, cpu::Store::kStream}) {
          // Guard bytes on both sides of the destination must survive.
          Buffer dst(bytes + 64, dst_off);
          std::memset(dst.data(), 0xa5, bytes + 64);
          cpu::copy(dst.data() + 32, src.data(), bytes, store);
          ASSERT_EQ(std::memcmp(dst.data() + 32, src.data(), bytes), 0)
              << bytes << " bytes, src+" << src_off << " dst+" << dst_off;
          for (size_t i = 0; i < 32; ++i) {
            ASSERT_EQ(dst.data()[i], 0xa5);
            ASSERT_EQ(dst.data()[32 + bytes + i], 0xa5);
          }
        }
      }
    }
  }
}

TEST_P(CopyTest, LargeStreamCopy) {
  const size_t bytes = (8u << 20) + 13;
  Buffer src(bytes, 3), normal(bytes, 5), stream(bytes, 5);
  fill_random(DataType::kInt64, src.data(), bytes / 8, rng_);
  cpu::copy(normal.data(), src.data(), bytes, cpu::Store::kNormal);
  cpu::copy(stream.data(), src.data(), bytes, cpu::Store::kStream);
  EXPECT_EQ(std::memcmp(normal.data(), src.data(), bytes), 0);
  EXPECT_EQ(std::memcmp(stream.data(), src.data(), bytes), 0);
}

INSTANTIATE_TEST_SUITE_P(Isa, CopyTest, ::testing::ValuesIn(available_isas()),
                         [](const auto& info) { return std::string(cpu::to_string(info.param)); });

}  // namespace
}  // namespace ringlet::kernels::test
