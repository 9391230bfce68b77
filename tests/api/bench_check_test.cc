// ringlet-bench's checker must catch what it is there to catch: an output
// the collective never wrote, and a single wrong element, in every dtype.
#include <gtest/gtest.h>

#include <vector>

#include "check.h"
#include "codec.h"

namespace ringlet::bench {
namespace {

class CheckerTest : public ::testing::TestWithParam<DataType> {};

TEST_P(CheckerTest, SimulatedTwoRankAllreduceIsRightAndOneFlipIsCaught) {
  const DataType t = GetParam();
  const int n = 2;
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
    Layout l = layout_for(Collective::kAllreduce, 256 * dtype_size(t), t, n);
    ASSERT_EQ(l.count, 256u);
    std::vector<std::vector<char>> send(n, std::vector<char>(l.bytes)),
        recv(n, std::vector<char>(l.bytes));
    for (int r = 0; r < n; ++r) {
      Case c{Collective::kAllreduce, t, op, 0, r, n, l, false};
      prepare(c, send[r].data(), recv[r].data());
      EXPECT_EQ(count_wrong(c, recv[r].data()), l.count) << "an unwritten output must be all wrong";
    }
    // The reduction, done here in double, written to rank 0's output.
    for (size_t i = 0; i < l.count; ++i) {
      double a = load(t, send[0].data(), i), b = load(t, send[1].data(), i), v = 0;
      switch (op) {
        case ReduceOp::kSum:
          v = a + b;
          break;
        case ReduceOp::kAvg:
          v = is_floating(t) ? (a + b) / 2 : static_cast<double>(static_cast<int64_t>(a + b) / 2);
          break;
        case ReduceOp::kProd:
          v = a * b;
          break;
        case ReduceOp::kMin:
          v = std::min(a, b);
          break;
        case ReduceOp::kMax:
          v = std::max(a, b);
          break;
      }
      store(t, recv[0].data(), i, v);
    }
    Case c0{Collective::kAllreduce, t, op, 0, 0, n, l, false};
    EXPECT_EQ(count_wrong(c0, recv[0].data()), 0u) << to_string(op);
    store(t, recv[0].data(), 17, load(t, recv[0].data(), 17) + 1);
    EXPECT_EQ(count_wrong(c0, recv[0].data()), 1u) << to_string(op);
  }
}

TEST_P(CheckerTest, InPlaceAllgatherNeedsEveryBlock) {
  const DataType t = GetParam();
  Layout l = layout_for(Collective::kAllgather, 3 * 64 * dtype_size(t), t, 3);
  ASSERT_EQ(l.count, 64u);
  std::vector<char> send(l.bytes), recv(l.bytes);
  Case c{Collective::kAllgather, t, ReduceOp::kSum, 0, 1, 3, l, true};
  prepare(c, send.data(), recv.data());
  OpBuffers b = op_buffers(c, send.data(), recv.data());
  EXPECT_EQ(b.send, recv.data() + 64 * dtype_size(t)) << "in place, this rank's block is the input";
  EXPECT_EQ(count_wrong(c, recv.data()), 2 * 64u)
      << "only this rank's block is right before the op";
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CheckerTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat64,
                                           DataType::kFloat16, DataType::kBFloat16, DataType::kInt8,
                                           DataType::kUInt8, DataType::kInt32, DataType::kInt64),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Codec, HalfAndBfloat16RoundTripSmallIntegersExactly) {
  for (int v = -2048; v <= 2048; ++v) EXPECT_EQ(half_to_double(half_from_double(v)), v);
  for (int v = -256; v <= 256; ++v) EXPECT_EQ(bf16_to_double(bf16_from_double(v)), v);
  EXPECT_EQ(half_to_double(half_from_double(0.5)), 0.5);
  EXPECT_EQ(half_to_double(half_from_double(65504.0)), 65504.0);
  EXPECT_EQ(half_to_double(half_from_double(0x1p-24)), 0x1p-24);  // smallest subnormal
}

TEST(Sizes, SweepFollowsNcclTests) {
  Options o;
  o.min_bytes = 4096;
  o.max_bytes = 65536;
  o.step_factor = 4;
  EXPECT_EQ(o.sizes(), (std::vector<size_t>{4096, 16384, 65536}));
  o.step_factor = 1;
  o.step_bytes = 1 << 20;
  EXPECT_EQ(o.sizes(), (std::vector<size_t>{4096})) << "nccl-tests adds -i (1M) when -f is 1";
  EXPECT_EQ(parse_size("4K"), 4096u);
  EXPECT_EQ(parse_size("64m"), 64u << 20);
  EXPECT_EQ(parse_size("1G"), 1u << 30);
  EXPECT_THROW(parse_size("4X"), std::invalid_argument);
  EXPECT_THROW(parse_size("-1"), std::invalid_argument);
}

}  // namespace
}  // namespace ringlet::bench
