// ringlet-bench's checker must catch what it is there to catch: an output
// the collective never wrote, and a single wrong element, in every dtype.
// Also its command line (what --help offers, what it refuses), its
// percentiles and its CSV's columns, without running any collective.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "check.h"
#include "codec.h"
#include "options.h"
#include "percentile.h"
#include "table.h"

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
    EXPECT_EQ(check_output(c0, recv[0].data()).checked, l.count) << "every element is looked at";
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
  EXPECT_EQ(check_output(c, recv.data()).checked, 3 * 64u) << "every rank's block is looked at";
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CheckerTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat64,
                                           DataType::kFloat16, DataType::kBFloat16, DataType::kInt8,
                                           DataType::kUInt8, DataType::kInt32, DataType::kInt64,
                                           DataType::kInt16, DataType::kUInt16),
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

TEST(Percentile, InterpolatesBetweenNearestRanks) {
  EXPECT_EQ(percentile({}, 50), 0);
  EXPECT_EQ(percentile({7}, 50), 7);
  EXPECT_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5) << "the median of an even count";
  EXPECT_DOUBLE_EQ(percentile({5, 1, 3}, 50), 3);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(hundred, 90), 90.1);
  EXPECT_DOUBLE_EQ(percentile(hundred, 99), 99.01);
  EXPECT_DOUBLE_EQ(percentile(hundred, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(hundred, 100), 100);
  // One slow op in a hundred shows in p99, not in p50.
  std::vector<double> one_slow(99, 10.0);
  one_slow.push_back(1000.0);
  EXPECT_DOUBLE_EQ(percentile(one_slow, 50), 10.0);
  EXPECT_GT(percentile(one_slow, 99), 10.0);
}

TEST(Csv, NewColumnsAreAppended) {
  const std::string header = kCsvHeader;
  EXPECT_EQ(header.rfind("impl,np,bytes,dtype,op,time_us,algbw_GBps,busbw_GBps,wrong,", 0), 0u)
      << "the documented columns keep their places: " << header;
  const std::string percentiles = ",p50_us,p90_us,p99_us";
  EXPECT_EQ(header.substr(header.size() - percentiles.size()), percentiles);
}

// Runs the command-line parser on `args` and returns what it printed.
struct Parsed {
  Command cmd;
  std::string out;
  std::string err;
};
Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ringlet-bench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Parsed p;
  p.cmd = parse_command_line(static_cast<int>(argv.size()), argv.data());
  p.out = ::testing::internal::GetCapturedStdout();
  p.err = ::testing::internal::GetCapturedStderr();
  return p;
}

TEST(CommandLine, HelpOffersOnlyWhatIsServed) {
  const Parsed p = parse({"--help"});
  EXPECT_EQ(p.cmd.action, Command::Action::kExit);
  EXPECT_EQ(p.cmd.exit_code, 0);
  // "nccl-tests" names the conventions followed, not a choice.
  std::string choices = p.out;
  for (size_t at; (at = choices.find("nccl-tests")) != std::string::npos;) choices.erase(at, 10);
  // The GPU choices only where this build serves them.
  std::vector<const char*> refused;
  if (!RINGLET_BENCH_UCX) refused.push_back("| ucx");
  if (!RINGLET_BENCH_CUDA) refused.insert(refused.end(), {"cuda", "nccl"});
  for (const char* r : refused) {
    EXPECT_EQ(choices.find(r), std::string::npos) << r << " is offered in\n" << p.out;
  }
  if (RINGLET_BENCH_CUDA) {
    EXPECT_NE(p.out.find("cuda (device buffers on this rank's GPU)"), std::string::npos) << p.out;
  }
  if (RINGLET_BENCH_UCX) {
    EXPECT_NE(p.out.find("auto | shm | tcp | ucx (sets RINGLET_TRANSPORT)"), std::string::npos)
        << p.out;
  }
  for (const char* offered : {"--device", "--backend", "--transport", "--per-op-barrier", "p50", "p90", "p99"}) {
    EXPECT_NE(p.out.find(offered), std::string::npos) << offered << " is missing from\n" << p.out;
  }
}

TEST(CommandLine, RefusedChoicesSayWhyAndWhatIsAccepted) {
  struct Refusal {
    std::vector<std::string> args;
    std::vector<std::string> said;
  };
  const Refusal refusals[] = {
      RINGLET_BENCH_CUDA
          ? Refusal{{"allgather", "--device", "cuda", "--backend", "mpi"},
                    {"--backend", "with --device cuda, one of nccl, ring (asked: mpi)"}}
          : Refusal{{"allreduce", "--device", "cuda"},
                    {"--device", "cuda is not served by this build", "accepted: cpu"}},
      {{"allreduce", "--backend", "nccl"},
       {"--backend", "nccl needs --device cuda", "accepted: ring, mpi"}},
      {{"allreduce", "--backend", "ring,nccl"}, {"nccl needs --device cuda"}},
      RINGLET_BENCH_UCX ? Refusal{{"allreduce", "--transport", "rdma"},
                                  {"--transport", "'rdma' is not one of auto, shm, tcp, ucx"}}
                        : Refusal{{"allreduce", "--transport", "ucx"},
                                  {"--transport", "ucx: this build has no UCX carrier",
                                   "accepted: auto, shm, tcp"}},
      {{"allreduce", "--transport", "rdma"}, {"'rdma' is not one of auto, shm, tcp"}},
      {{"allreduce", "--device", "tpu"}, {"'tpu' is not one of cpu, cuda"}},
  };
  for (const Refusal& r : refusals) {
    const Parsed p = parse(r.args);
    EXPECT_EQ(p.cmd.action, Command::Action::kExit) << r.args.back();
    EXPECT_EQ(p.cmd.exit_code, 2) << r.args.back();
    for (const std::string& piece : r.said) {
      EXPECT_NE(p.err.find(piece), std::string::npos) << piece << " missing from: " << p.err;
    }
  }
}

TEST(CommandLine, DeviceCudaNamesTheGpuOperations) {
  if (!RINGLET_BENCH_CUDA) GTEST_SKIP() << "this build has no device collectives (CUDA and NCCL)";
  Parsed nccl = parse({"allreduce", "--device", "cuda", "--backend", "nccl"});
  ASSERT_EQ(nccl.cmd.action, Command::Action::kRun) << nccl.err;
  EXPECT_TRUE(nccl.cmd.options.cuda);
  EXPECT_EQ(nccl.cmd.options.gpu_operations, "NCCL");
  Parsed ring = parse({"allreduce", "--device", "cuda"});
  ASSERT_EQ(ring.cmd.action, Command::Action::kRun) << ring.err;
  EXPECT_EQ(ring.cmd.options.gpu_operations, "RING");
  EXPECT_FALSE(parse({"allreduce"}).cmd.options.cuda);
  Parsed tensors = parse({"allreduce", "--device", "cuda", "--backend", "nccl", "--tensors", "4"});
  EXPECT_EQ(tensors.cmd.exit_code, 2);
  EXPECT_NE(tensors.err.find("--tensors"), std::string::npos) << tensors.err;
}

// --transport ucx sets RINGLET_TRANSPORT=ucx where the library has the carrier.
TEST(CommandLine, TransportUcxIsServedWhereTheBuildHasUcx) {
  if (!RINGLET_BENCH_UCX) GTEST_SKIP() << "this build has no UCX carrier";
  const Parsed p = parse({"allreduce", "--transport", "ucx"});
  ASSERT_EQ(p.cmd.action, Command::Action::kRun) << p.err;
  EXPECT_EQ(p.cmd.options.transport, "ucx");
}

TEST(CommandLine, PerOpBarrierIsOffByDefault) {
  Parsed plain = parse({"allreduce"});
  ASSERT_EQ(plain.cmd.action, Command::Action::kRun) << plain.err;
  EXPECT_FALSE(plain.cmd.options.per_op_barrier);
  Parsed with = parse({"allreduce", "--per-op-barrier", "--transport", "tcp"});
  ASSERT_EQ(with.cmd.action, Command::Action::kRun) << with.err;
  EXPECT_TRUE(with.cmd.options.per_op_barrier);
  EXPECT_EQ(with.cmd.options.transport, "tcp");
}

}  // namespace
}  // namespace ringlet::bench
