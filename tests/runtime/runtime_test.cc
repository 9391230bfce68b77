// Multi-rank tests of the runtime, run as N ranks through ringletrun:
//   ringletrun -np 3 runtime_test
// Every rank runs the same tests in the same order; within a test, ranks
// submit their names in different orders, and the runtime must match them.
// Values are small integers so that every result is exact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/mpi/mpi_bootstrap.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/runtime/runtime.h"
#include "tests/common/throws_failure.h"

namespace ringlet::test {
namespace {

using core::runtime::Handle;
using core::runtime::HandleTable;
using core::runtime::Runtime;
using core::runtime::RuntimeError;

std::unique_ptr<Runtime> g_rt;

std::unique_ptr<Runtime> make_runtime() {
  core::LaunchInfo launch = core::detect_launch();
  // Under mpirun without RINGLET_RENDEZVOUS the ranks meet through MPI, as init() has them.
  if (core::needs_mpi_bootstrap(launch)) core::complete_launch_with_mpi(launch);
  return std::make_unique<Runtime>(core::Communicator::create(core::load_config(), launch));
}

// HOROVOD_CPU_OPERATIONS=MPI: the host collectives run through MPI (under mpirun).
bool mpi_operations() {
  const char* v = std::getenv("HOROVOD_CPU_OPERATIONS");
  return v != nullptr && (std::string(v) == "MPI" || std::string(v) == "mpi");
}

Runtime& rt() {
  if (!g_rt) g_rt = make_runtime();
  return *g_rt;
}

// The error a handle fails with ("" when it succeeds), without the rank (the
// API says "on rank N" once), after checking that the runtime filled it in.
std::string error_of(Handle h) {
  try {
    rt().synchronize(h);
    return "";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.rank(), rt().rank()) << e.what();
    return e.body();
  }
}

std::mt19937 rng_for_rank(int salt) { return std::mt19937(1234 + 7919 * rt().rank() + salt); }

TEST(Runtime, RandomOrderAllreduce) {
  const int n = rt().size(), me = rt().rank();
  constexpr int kTensors = 64;
  std::vector<std::vector<float>> bufs(kTensors);
  std::vector<int> order(kTensors);
  for (int i = 0; i < kTensors; ++i) {
    bufs[i].assign(10 + i * 3, static_cast<float>(me + i));
    order[i] = i;
  }
  auto rng = rng_for_rank(1);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Handle> handles(kTensors);
  for (int i : order) {
    handles[i] = rt().enqueue_allreduce("grad." + std::to_string(i), bufs[i].data(), bufs[i].data(),
                                        {static_cast<int64_t>(bufs[i].size())}, DataType::kFloat32);
  }
  std::shuffle(order.begin(), order.end(), rng);
  for (int i : order) {
    auto result = rt().synchronize(handles[i]);
    EXPECT_EQ(result.shape, std::vector<int64_t>{static_cast<int64_t>(bufs[i].size())});
    const float want = static_cast<float>(n * (n - 1) / 2 + n * i);
    for (float v : bufs[i]) ASSERT_EQ(v, want) << "tensor " << i;
  }
}

// Hundreds of tensors per step, many steps, mixed dtypes, ops and scale
// factors: results checked, and fusion must have happened.
TEST(Runtime, HundredsOfTensorsManySteps) {
  const int n = rt().size(), me = rt().rank();
  constexpr int kTensors = 300, kSteps = 8;
  const auto before = rt().stats();
  auto rng = rng_for_rank(2);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::vector<float>> f(kTensors);
    std::vector<std::vector<int32_t>> in(kTensors), out(kTensors);
    std::vector<int> order(kTensors);
    for (int i = 0; i < kTensors; ++i) {
      order[i] = i;
      const size_t count = 1 + (i * 37) % 700;
      f[i].assign(count, static_cast<float>(me + step));
      in[i].assign(count, me + i);
      out[i].assign(count, -1);
    }
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<Handle> h(kTensors);
    for (int i : order) {
      const std::string name = "step.t" + std::to_string(i);
      switch (i % 3) {
        case 0:  // float average: (sum of me+step) / n
          h[i] = rt().enqueue_allreduce(name, f[i].data(), f[i].data(), {static_cast<int64_t>(f[i].size())},
                                        DataType::kFloat32, ReduceOp::kAvg);
          break;
        case 1:  // float sum with prescale 2 and postscale 0.5
          h[i] = rt().enqueue_allreduce(name, f[i].data(), f[i].data(), {static_cast<int64_t>(f[i].size())},
                                        DataType::kFloat32, ReduceOp::kSum, 2.0, 0.5);
          break;
        default:  // int32 max, out of place
          h[i] = rt().enqueue_allreduce(name, in[i].data(), out[i].data(), {static_cast<int64_t>(in[i].size())},
                                        DataType::kInt32, ReduceOp::kMax);
      }
    }
    for (int i = 0; i < kTensors; ++i) {
      ASSERT_EQ(error_of(h[i]), "") << "tensor " << i;
      const float sum = static_cast<float>(n * (n - 1) / 2 + n * step);
      if (i % 3 == 0) {
        for (float v : f[i]) ASSERT_FLOAT_EQ(v, sum / n) << i;
      } else if (i % 3 == 1) {
        for (float v : f[i]) ASSERT_FLOAT_EQ(v, sum) << i;
      } else {
        for (int32_t v : out[i]) ASSERT_EQ(v, n - 1 + i) << i;
      }
    }
  }
  const auto after = rt().stats();
  EXPECT_EQ(after.tensors - before.tensors, uint64_t{kTensors} * kSteps);
  EXPECT_GT(after.fused_tensors, before.fused_tensors);
  EXPECT_LT(after.collectives - before.collectives, uint64_t{kTensors} * kSteps);
  if (me == 0) {
    std::printf("[runtime] %d x %d tensors ran as %llu collectives over %llu cycles\n", kSteps, kTensors,
                static_cast<unsigned long long>(after.collectives - before.collectives),
                static_cast<unsigned long long>(after.cycles - before.cycles));
  }
}

TEST(Runtime, OtherCollectives) {
  const int n = rt().size(), me = rt().rank();
  // allgather: rank r contributes r+1 rows of 3 elements valued r.
  std::vector<int32_t> mine((me + 1) * 3, me);
  // broadcast from the last rank.
  std::vector<double> b(17, me == n - 1 ? 42.0 : -1.0);
  // reducescatter of 2n+1 rows of 2: rank r gets rows per Horovod's split.
  const int64_t rows = 2 * n + 1;
  std::vector<float> rs(rows * 2);
  for (int64_t i = 0; i < rows * 2; ++i) rs[i] = static_cast<float>(i + me);
  // alltoall: rank me sends (j + 1) rows of 2 to rank j, valued 100*me + j.
  std::vector<int64_t> splits(n);
  std::vector<int64_t> a2a;
  for (int j = 0; j < n; ++j) {
    splits[j] = j + 1;
    for (int k = 0; k < (j + 1) * 2; ++k) a2a.push_back(100 * me + j);
  }
  std::vector<Handle> h;
  std::vector<int> order{0, 1, 2, 3};
  auto rng = rng_for_rank(3);
  std::shuffle(order.begin(), order.end(), rng);
  h.resize(4);
  for (int k : order) {
    switch (k) {
      case 0: h[0] = rt().enqueue_allgather("ag", mine.data(), {me + 1, 3}, DataType::kInt32); break;
      case 1: h[1] = rt().enqueue_broadcast("bc", b.data(), {17}, DataType::kFloat64, n - 1); break;
      case 2:
        h[2] = rt().enqueue_reducescatter("rs", rs.data(), {rows, 2}, DataType::kFloat32, ReduceOp::kSum);
        break;
      case 3:
        h[3] = rt().enqueue_alltoall("a2a", a2a.data(), {static_cast<int64_t>(a2a.size() / 2), 2},
                                     DataType::kInt64, splits);
        break;
    }
  }
  auto ag = rt().synchronize(h[0]);
  EXPECT_EQ(ag.shape, (std::vector<int64_t>{n * (n + 1) / 2, 3}));
  {
    const auto* v = reinterpret_cast<const int32_t*>(ag.data.data());
    size_t at = 0;
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < (r + 1) * 3; ++k) ASSERT_EQ(v[at++], r);
  }
  rt().synchronize(h[1]);
  for (double v : b) ASSERT_EQ(v, 42.0);
  auto r = rt().synchronize(h[2]);
  {
    const int64_t my_rows = rows / n + (me < rows % n ? 1 : 0);
    int64_t first = 0;
    for (int q = 0; q < me; ++q) first += rows / n + (q < rows % n ? 1 : 0);
    EXPECT_EQ(r.shape, (std::vector<int64_t>{my_rows, 2}));
    const auto* v = reinterpret_cast<const float*>(r.data.data());
    for (int64_t i = 0; i < my_rows * 2; ++i) {
      ASSERT_EQ(v[i], static_cast<float>(n * (first * 2 + i) + n * (n - 1) / 2));
    }
  }
  auto a = rt().synchronize(h[3]);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{n * (me + 1), 2}));
  EXPECT_EQ(a.received_splits, std::vector<int64_t>(n, me + 1));
  {
    const auto* v = reinterpret_cast<const int64_t*>(a.data.data());
    size_t at = 0;
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < (me + 1) * 2; ++k) ASSERT_EQ(v[at++], 100 * i + me);
  }
}

// Each kind of mismatch fails the handle on every rank with the named error.
TEST(Runtime, MismatchesFailOnEveryRank) {
  const int me = rt().rank();
  const bool odd = me == 1;  // rank 1 differs from everyone else
  std::vector<float> buf(64, 1.0f);
  std::vector<double> dbuf(64, 1.0);
  struct Case {
    std::string want;
    std::function<Handle()> submit;
  };
  const std::string r0 = "rank 0 sent ", r1 = ", rank 1 sent ";
  std::vector<Case> cases = {
      {"Mismatched allreduce tensor shapes for 'fc1.weight': rank 0 sent [4, 5], rank 1 sent [4, 6]",
       [&] {
         return rt().enqueue_allreduce("fc1.weight", buf.data(), buf.data(), {4, odd ? 6 : 5}, DataType::kFloat32);
       }},
      {"Mismatched allreduce data types for 'dt': rank 0 sent float, rank 1 sent double",
       [&] {
         return odd ? rt().enqueue_allreduce("dt", dbuf.data(), dbuf.data(), {8}, DataType::kFloat64)
                    : rt().enqueue_allreduce("dt", buf.data(), buf.data(), {8}, DataType::kFloat32);
       }},
      {"Mismatched allreduce reduction ops for 'op': rank 0 sent sum, rank 1 sent max",
       [&] {
         return rt().enqueue_allreduce("op", buf.data(), buf.data(), {8}, DataType::kFloat32,
                                       odd ? ReduceOp::kMax : ReduceOp::kSum);
       }},
      {"Mismatched allreduce prescale factors for 'pre': rank 0 sent 1, rank 1 sent 0.5",
       [&] {
         return rt().enqueue_allreduce("pre", buf.data(), buf.data(), {8}, DataType::kFloat32, ReduceOp::kSum,
                                       odd ? 0.5 : 1.0);
       }},
      {"Mismatched allreduce postscale factors for 'post': rank 0 sent 1, rank 1 sent 3",
       [&] {
         return rt().enqueue_allreduce("post", buf.data(), buf.data(), {8}, DataType::kFloat32, ReduceOp::kSum,
                                       1.0, odd ? 3.0 : 1.0);
       }},
      {"Mismatched broadcast root ranks for 'root': rank 0 sent 0, rank 1 sent 1",
       [&] { return rt().enqueue_broadcast("root", buf.data(), {8}, DataType::kFloat32, odd ? 1 : 0); }},
      {"Mismatched allgather tensor shapes (all but the first dimension must agree) for 'ag': rank 0 sent [2, 3], "
       "rank 1 sent [2, 4]",
       [&] { return rt().enqueue_allgather("ag", buf.data(), {2, odd ? 4 : 3}, DataType::kFloat32); }},
      {"Mismatched collective operations for 'kind': rank 0 sent allreduce, rank 1 sent broadcast",
       [&] {
         return odd ? rt().enqueue_broadcast("kind", buf.data(), {8}, DataType::kFloat32, 0)
                    : rt().enqueue_allreduce("kind", buf.data(), buf.data(), {8}, DataType::kFloat32);
       }},
  };
  std::vector<Handle> h;
  for (auto& c : cases) h.push_back(c.submit());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(error_of(h[i]), cases[i].want);
  // The runtime keeps working after mismatches, and the names are free again.
  Handle ok = rt().enqueue_allreduce("fc1.weight", buf.data(), buf.data(), {8}, DataType::kFloat32);
  EXPECT_EQ(error_of(ok), "");
}

// Transfers around the ring, each rank's send and recv submitted in a random
// order among allreduces of every rank; then a recv that waits while the
// ranks run a collective before its send (a pipeline's dependency); one of
// 3 MiB; and a mismatched size, which fails its two ranks only.
TEST(Runtime, TransfersMeetTheirPeersAmongCollectives) {
  const int n = rt().size(), me = rt().rank();
  if (n < 2) GTEST_SKIP() << "a transfer needs two ranks";
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  auto name = [](int from, int to, int k) {
    return "t." + std::to_string(from) + "." + std::to_string(to) + "." + std::to_string(k);
  };
  constexpr int kRounds = 3;
  std::vector<std::vector<int64_t>> out(kRounds), in(kRounds, std::vector<int64_t>(5, -1));
  std::vector<std::vector<float>> sums(kRounds, std::vector<float>(6, 1.0f));
  std::vector<std::function<Handle()>> submit;
  std::vector<Handle> h(3 * kRounds);
  for (int k = 0; k < kRounds; ++k) {
    for (int i = 0; i < 5; ++i) out[k].push_back(1000 * me + 10 * k + i);
    submit.push_back([&, k] {
      return h[3 * k] = rt().enqueue_send(name(me, next, k), out[k].data(), {5}, DataType::kInt64,
                                          next);
    });
    submit.push_back([&, k] {
      return h[3 * k + 1] = rt().enqueue_recv(name(prev, me, k), in[k].data(), {5},
                                              DataType::kInt64, prev);
    });
    submit.push_back([&, k] {
      return h[3 * k + 2] = rt().enqueue_allreduce("sum." + std::to_string(k), sums[k].data(),
                                                   sums[k].data(), {6}, DataType::kFloat32);
    });
  }
  auto rng = rng_for_rank(11);
  std::shuffle(submit.begin(), submit.end(), rng);
  for (auto& f : submit) f();
  for (int k = 0; k < kRounds; ++k) {
    EXPECT_EQ(error_of(h[3 * k]), "");
    EXPECT_EQ(error_of(h[3 * k + 1]), "");
    EXPECT_EQ(error_of(h[3 * k + 2]), "");
    for (int i = 0; i < 5; ++i) ASSERT_EQ(in[k][i], 1000 * prev + 10 * k + i);
    for (float v : sums[k]) ASSERT_EQ(v, static_cast<float>(n));
  }

  // Rank 0's recv waits while every rank runs a broadcast: the last rank
  // sends only once that broadcast is done.
  std::vector<double> late(3, 0.0);
  Handle got = 0;
  if (me == 0) got = rt().enqueue_recv("late", late.data(), {3}, DataType::kFloat64, n - 1);
  std::vector<float> b(4, me == 0 ? 7.0f : 0.0f);
  EXPECT_EQ(error_of(rt().enqueue_broadcast("before.late", b.data(), {4}, DataType::kFloat32, 0)),
            "");
  for (float v : b) ASSERT_EQ(v, 7.0f);
  if (me == n - 1) {
    std::vector<double> early{1.5, 2.5, 3.5};
    EXPECT_EQ(error_of(rt().enqueue_send("late", early.data(), {3}, DataType::kFloat64, 0)), "");
  }
  if (me == 0) {
    EXPECT_EQ(error_of(got), "");
    EXPECT_EQ(late, (std::vector<double>{1.5, 2.5, 3.5}));
  }

  // 3 MiB from the last rank to rank 0, in several of the links' messages.
  std::vector<uint8_t> big(3 << 20);
  if (me == n - 1) {
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + 3);
    EXPECT_EQ(error_of(rt().enqueue_send("big", big.data(), {static_cast<int64_t>(big.size())},
                                         DataType::kUInt8, 0)),
              "");
  } else if (me == 0) {
    EXPECT_EQ(error_of(rt().enqueue_recv("big", big.data(), {1024, 3072}, DataType::kUInt8, n - 1)),
              "");
    for (size_t i = 0; i < big.size(); ++i) ASSERT_EQ(big[i], static_cast<uint8_t>(i * 7 + 3));
  }

  // A size the two ranks disagree on fails both, naming both; the others
  // go on.
  std::vector<int32_t> small(8, 0);
  if (me == 0) {
    EXPECT_EQ(error_of(rt().enqueue_send("odd", small.data(), {8}, DataType::kInt32, 1)),
              "Mismatched send and recv sizes for 'odd': rank 0 sends int32 [8], rank 1 "
              "receives into int32 [7]");
  } else if (me == 1) {
    EXPECT_EQ(error_of(rt().enqueue_recv("odd", small.data(), {7}, DataType::kInt32, 0)),
              "Mismatched send and recv sizes for 'odd': rank 0 sends int32 [8], rank 1 "
              "receives into int32 [7]");
  }
  std::vector<float> after(2, 1.0f);
  EXPECT_EQ(error_of(rt().enqueue_allreduce("after.transfers", after.data(), after.data(), {2},
                                            DataType::kFloat32)),
            "");
  EXPECT_EQ(after[0], static_cast<float>(n));
}

// What one rank can tell is wrong with a transfer is refused at submission.
TEST(Runtime, TransfersRefusedAtSubmission) {
  const int n = rt().size(), me = rt().rank();
  int32_t x = 0;
  auto refusal = [&](const std::function<void()>& f) {
    try {
      f();
      return std::string("accepted");
    } catch (const RuntimeError& e) {
      return e.body();
    }
  };
  EXPECT_EQ(refusal([&] { rt().enqueue_send("self", &x, {}, DataType::kInt32, me); }),
            "send 'self': rank " + std::to_string(me) + " cannot send to itself");
  EXPECT_EQ(refusal([&] { rt().enqueue_recv("far", &x, {}, DataType::kInt32, n); }),
            "recv 'far': source " + std::to_string(n) + " is not a rank (ranks 0.." +
                std::to_string(n - 1) + ")");
}

TEST(Runtime, DuplicateNameRefusedAtOnce) {
  std::vector<float> a(8, 1.0f), b(8, 1.0f);
  // The other ranks submit 'dup' only after the barrier, which rank 0 reaches
  // after its second submission: until then its first 'dup' cannot complete.
  if (rt().rank() != 0) rt().barrier();
  Handle h = rt().enqueue_allreduce("dup", a.data(), a.data(), {8}, DataType::kFloat32);
  if (rt().rank() == 0) {
    try {
      rt().enqueue_allreduce("dup", b.data(), b.data(), {8}, DataType::kFloat32);
      ADD_FAILURE() << "a second 'dup' in flight was accepted";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("'dup': a collective of this name is already in flight"),
                std::string::npos)
          << e.what();
    }
    rt().barrier();
  }
  EXPECT_EQ(error_of(h), "");
  EXPECT_EQ(a[0], static_cast<float>(rt().size()));
  // Once synchronized the name can be used again.
  EXPECT_EQ(error_of(rt().enqueue_allreduce("dup", b.data(), b.data(), {8}, DataType::kFloat32)), "");
}

// A wait its caller may interrupt (a binding serving signals): asked every
// 50 ms while the handle is pending, it gives up with kShutdown and leaves
// the handle pending, and a later synchronize() completes it. Rank 0 comes
// late; the others are interrupted waiting for it.
TEST(Runtime, AnInterruptedSynchronizeLeavesTheHandlePending) {
  const int n = rt().size(), me = rt().rank();
  std::vector<float> x(4, static_cast<float>(me + 1));
  rt().barrier();
  if (me == 0) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    Handle h = rt().enqueue_allreduce("interrupted", x.data(), x.data(), {4}, DataType::kFloat32);
    int asked = 0;
    rt().synchronize(h, [&asked] { return ++asked > 1000; });  // never gives up here
  } else {
    Handle h = rt().enqueue_allreduce("interrupted", x.data(), x.data(), {4}, DataType::kFloat32);
    int asked = 0;
    const auto start = std::chrono::steady_clock::now();
    try {
      rt().synchronize(h, [&asked] { return ++asked == 3; });
      ADD_FAILURE() << "the wait was not interrupted";
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.kind(), common::FailureKind::kShutdown) << e.what();
      EXPECT_EQ(e.body(), "interrupted while waiting for handle " + std::to_string(h) +
                              ", which stays pending: synchronize it again");
    }
    EXPECT_EQ(asked, 3);
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, std::chrono::milliseconds(100));  // asked between 50 ms slices
    EXPECT_LT(waited, std::chrono::milliseconds(900));
    EXPECT_FALSE(rt().poll(h));
    EXPECT_NO_THROW(rt().synchronize(h));
  }
  for (float v : x) EXPECT_EQ(v, static_cast<float>(n * (n + 1) / 2));
}

TEST(Runtime, PollAndWait) {
  std::vector<float> a(1024, 1.0f);
  Handle h = rt().enqueue_allreduce("poll", a.data(), a.data(), {1024}, DataType::kFloat32);
  EXPECT_EQ(rt().wait(h, std::chrono::seconds(20)), HandleTable::Waited::kCompleted);
  EXPECT_TRUE(rt().poll(h));
  EXPECT_EQ(error_of(h), "");
  // Released by synchronize.
  EXPECT_TRUE(test::throws_failure(common::FailureKind::kInvalidArgument, [&] { rt().poll(h); }));
}

// A grouped allreduce fuses atomically, whatever the threshold, and its fused
// stream (here 6.6 MB, several 1 MiB pieces with tensors across their
// boundaries) comes back exact, averaged and scaled.
// The continuation that TensorFlow's asynchronous kernels finish with: each
// outcome arrives once, with the result or the failure, and no thread waits.
TEST(Runtime, SynchronizeThenDeliversResultsAndFailures) {
  using core::runtime::HandleTable;
  const int me = rt().rank();
  std::vector<int32_t> rows(static_cast<size_t>(me + 1) * 2, me);
  std::vector<float> bad(8, 1.0f);
  std::promise<HandleTable::Outcome> gathered, mismatched;
  rt().synchronize_then(rt().enqueue_allgather("then.ag", rows.data(), {me + 1, 2}, DataType::kInt32),
                        [&](HandleTable::Outcome o) { gathered.set_value(std::move(o)); });
  rt().synchronize_then(
      rt().enqueue_allreduce("then.bad", bad.data(), bad.data(), {me == 1 ? 8 : 4}, DataType::kFloat32),
      [&](HandleTable::Outcome o) { mismatched.set_value(std::move(o)); });

  auto g = gathered.get_future();
  ASSERT_EQ(g.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  HandleTable::Outcome ag = g.get();
  ASSERT_FALSE(ag.failure.has_value()) << ag.failure->what();
  const int n = rt().size();
  EXPECT_EQ(ag.result.shape, (std::vector<int64_t>{n * (n + 1) / 2, 2}));
  std::vector<int32_t> want;
  for (int r = 0; r < n; ++r) want.insert(want.end(), static_cast<size_t>(r + 1) * 2, r);
  ASSERT_EQ(ag.result.data.size(), want.size() * sizeof(int32_t));
  EXPECT_EQ(std::memcmp(ag.result.data.data(), want.data(), ag.result.data.size()), 0);

  auto m = mismatched.get_future();
  ASSERT_EQ(m.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  HandleTable::Outcome bad_outcome = m.get();
  if (n > 1) {
    ASSERT_TRUE(bad_outcome.failure.has_value());
    EXPECT_EQ(bad_outcome.failure->kind(), common::FailureKind::kMismatch);
    EXPECT_NE(std::string(bad_outcome.failure->what()).find("'then.bad'"), std::string::npos)
        << bad_outcome.failure->what();
  }
}

TEST(Runtime, GroupedAllreduceAcrossPieces) {
  const int n = rt().size(), me = rt().rank();
  const std::vector<size_t> counts = {300001, 7, 262144, 1, 500000, 0, 591};
  std::vector<std::vector<float>> in(counts.size()), out(counts.size());
  std::vector<Runtime::GroupMember> members;
  for (size_t i = 0; i < counts.size(); ++i) {
    in[i].resize(counts[i]);
    out[i].assign(counts[i], -1.0f);
    for (size_t k = 0; k < counts[i]; ++k) in[i][k] = static_cast<float>((k % 13) + me);
    members.push_back({"group.t" + std::to_string(i), in[i].data(), i % 2 ? in[i].data() : out[i].data(),
                       {static_cast<int64_t>(counts[i])}});
  }
  // Submit in a different order on each rank: the group still runs as one.
  auto rng = rng_for_rank(5);
  std::shuffle(members.begin(), members.end(), rng);
  const auto before = rt().stats();
  auto handles = rt().enqueue_grouped_allreduce(members, DataType::kFloat32, ReduceOp::kAvg, 2.0, 3.0);
  for (Handle h : handles) ASSERT_EQ(error_of(h), "");
  const auto after = rt().stats();
  EXPECT_EQ(after.collectives - before.collectives, 1u) << "the group ran as one response";
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto& got = i % 2 ? in[i] : out[i];
    for (size_t k = 0; k < counts[i]; ++k) {
      // avg of 2*((k%13)+r) over r, times 3
      const float want = 3.0f * 2.0f * (static_cast<float>(k % 13) + (n - 1) / 2.0f);
      ASSERT_FLOAT_EQ(got[k], want) << "tensor " << i << " element " << k;
    }
  }
}

// Steady state goes through the response cache (unless HOROVOD_CACHE_CAPACITY
// is 0); a rank whose tensor changed since it was cached still gets the
// mismatch error on every rank, and the name works again afterwards.
TEST(Runtime, ResponseCacheSteadyStateAndInvalidation) {
  const int n = rt().size(), me = rt().rank();
  const bool cache_on = core::load_config().cache_capacity > 0;
  const auto before = rt().stats();
  auto rng = rng_for_rank(6);
  for (int step = 0; step < 6; ++step) {
    std::vector<std::vector<int32_t>> t(20);
    std::vector<int> order(20);
    for (int i = 0; i < 20; ++i) {
      t[i].assign(16 + i, me + step);
      order[i] = i;
    }
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<Handle> h(20);
    for (int i : order) {
      h[i] = rt().enqueue_allreduce("cache.t" + std::to_string(i), t[i].data(), t[i].data(),
                                    {static_cast<int64_t>(t[i].size())}, DataType::kInt32);
    }
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(error_of(h[i]), "");
      for (int32_t v : t[i]) ASSERT_EQ(v, n * (n - 1) / 2 + n * step);
    }
  }
  const auto after = rt().stats();
  if (cache_on) {
    EXPECT_GE(after.cached_tensors - before.cached_tensors, 20u * 4) << "steps 2.. should mostly be cached";
  } else {
    EXPECT_EQ(after.cached_tensors, before.cached_tensors);
  }
  std::vector<float> a(16, 1.0f);
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(error_of(rt().enqueue_allreduce("inv", a.data(), a.data(), {8}, DataType::kFloat32)), "");
  }
  EXPECT_EQ(error_of(rt().enqueue_allreduce("inv", a.data(), a.data(), {me == 1 ? 9 : 8}, DataType::kFloat32)),
            "Mismatched allreduce tensor shapes for 'inv': rank 0 sent [8], rank 1 sent [9]");
  EXPECT_EQ(error_of(rt().enqueue_allreduce("inv", a.data(), a.data(), {8}, DataType::kFloat32)), "");
}

// Uneven data: rank r has 2r+2 steps, then joins. Each step, every rank still
// active contributes 1 (joined ranks contribute zeros): the sum counts the
// active ranks and the average divides by the full size. join() returns the
// last rank to join.
TEST(Runtime, JoinWithUnevenData) {
  const int n = rt().size(), me = rt().rank();
  const int my_steps = 2 * me + 2;
  for (int step = 0; step < my_steps; ++step) {
    std::vector<float> s(100, 1.0f), a(7, 1.0f);
    Handle hs = rt().enqueue_allreduce("join.sum", s.data(), s.data(), {100}, DataType::kFloat32);
    Handle ha = rt().enqueue_allreduce("join.avg", a.data(), a.data(), {7}, DataType::kFloat32, ReduceOp::kAvg);
    ASSERT_EQ(error_of(hs), "");
    ASSERT_EQ(error_of(ha), "");
    int active = 0;
    for (int r = 0; r < n; ++r) active += step < 2 * r + 2 ? 1 : 0;
    for (float v : s) ASSERT_EQ(v, static_cast<float>(active)) << "step " << step;
    for (float v : a) ASSERT_FLOAT_EQ(v, static_cast<float>(active) / n) << "step " << step;
  }
  std::vector<float> x(4, 1.0f);
  EXPECT_EQ(rt().join(), n - 1);
  // Everyone is active again.
  EXPECT_EQ(error_of(rt().enqueue_allreduce("join.after", x.data(), x.data(), {4}, DataType::kFloat32)), "");
  EXPECT_EQ(x[0], static_cast<float>(n));
}

TEST(Runtime, Barrier) {
  // Rank 0 arrives late; nobody may leave before it arrives. The ranks share
  // the host's monotonic clock, so this compares instants across processes
  // (not durations, which depend on when each rank began the test).
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  int64_t arrived = 0;
  if (rt().rank() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    arrived = now_ns();
  }
  rt().barrier();
  const int64_t left = now_ns();
  int64_t rank0_arrived = 0;
  ASSERT_EQ(error_of(rt().enqueue_allreduce("barrier.arrival", &arrived, &rank0_arrived, {1},
                                            DataType::kInt64, ReduceOp::kMax)),
            "");
  EXPECT_GE(left, rank0_arrived);
  rt().barrier();  // and again: the n-th barrier meets the n-th
}

// Run where HOROVOD_STALL_SHUTDOWN_TIME_SECONDS is set (a ctest entry of its own).
TEST(Stall, WarnsThenShutsDownNamingMissingRanks) {
  const char* shut = std::getenv("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS");
  if (!shut || std::string(shut) == "0") GTEST_SKIP() << "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS not set";
  std::vector<float> a(8, 1.0f);
  // Once on every rank, so that with the response cache on, rank 0's second
  // submission waits as a cache bit rather than in the negotiation table.
  EXPECT_EQ(error_of(rt().enqueue_allreduce("stalled", a.data(), a.data(), {8}, DataType::kFloat32)), "");
  Handle h = -1;
  if (rt().rank() == 0) h = rt().enqueue_allreduce("stalled", a.data(), a.data(), {8}, DataType::kFloat32);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (rt().stopped_reason().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string why = rt().stopped_reason();
  EXPECT_NE(why.find("stall shutdown"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 1 has not submitted 'stalled'"), std::string::npos) << why;
  if (rt().rank() == 0) {
    EXPECT_NE(error_of(h).find("stall shutdown"), std::string::npos);
    EXPECT_GE(rt().stats().stall_warnings, 1u);
  }
  g_rt.reset();
}

// One fused step of three tensors; retried until the three complete in one
// cycle on every rank (submission timing decides that), at most 50 times.
bool fused_step(const std::string& prefix, int attempt) {
  std::vector<std::vector<float>> t(3, std::vector<float>(256, 1.0f));
  const auto before = rt().stats();
  std::vector<Handle> h;
  for (int i = 0; i < 3; ++i) {
    h.push_back(rt().enqueue_allreduce(prefix + std::to_string(attempt) + "." + std::to_string(i), t[i].data(),
                                       t[i].data(), {256}, DataType::kFloat32));
  }
  for (Handle x : h) rt().synchronize(x);
  // Agree across ranks whether every rank fused all three.
  int fused = rt().stats().fused_tensors - before.fused_tensors == 3 ? 1 : 0;
  Handle v = rt().enqueue_allreduce(prefix + "vote" + std::to_string(attempt), &fused, &fused, {1},
                                    DataType::kInt32, ReduceOp::kMin);
  rt().synchronize(v);
  return fused == 1;
}

// The activities directly inside each allreduce op span of a timeline, per
// span, in order (QUEUE first).
std::vector<std::vector<std::string>> allreduce_activities(const nlohmann::json& events) {
  std::vector<std::vector<std::string>> spans;
  std::map<int, std::vector<std::string>> open;  // per pid: the names of the open spans
  std::map<int, size_t> current;                 // per pid: its allreduce span in `spans`
  for (const auto& e : events) {
    const std::string ph = e.value("ph", "");
    if (ph != "B" && ph != "E") continue;
    const int pid = e["pid"].get<int>();
    auto& stack = open[pid];
    if (ph == "B") {
      const std::string name = e.value("name", "");
      if (stack.empty() && name == "ALLREDUCE") {
        current[pid] = spans.size();
        spans.emplace_back();
      } else if (stack.size() == 1 && stack[0] == "ALLREDUCE") {
        spans[current[pid]].push_back(name);
      }
      stack.push_back(name);
    } else if (!stack.empty()) {
      stack.pop_back();
    }
  }
  return spans;
}

// An allreduce's phases, as the algorithms report them (see
// collectives::PhaseObserver): the ring per fusion piece, the direct
// algorithm per round, one-step once.
bool is_allreduce_phase_sequence(const std::vector<std::string>& a) {
  auto at = [&](size_t i) { return i < a.size() ? a[i] : std::string(); };
  if (a.empty()) return false;
  if (a == std::vector<std::string>{"ONESTEP_ALLREDUCE"} ||
      a == std::vector<std::string>{"LOCAL_COPY"})
    return true;
  // MPI (HOROVOD_CPU_OPERATIONS=MPI): one call, as Horovod's MPI allreduce.
  if (a == std::vector<std::string>{"MPI_ALLREDUCE"} ||
      a == std::vector<std::string>{"PRESCALE", "MPI_ALLREDUCE"} ||
      a == std::vector<std::string>{"MEMCPY_IN_FUSION_BUFFER", "MPI_ALLREDUCE",
                                    "MEMCPY_OUT_FUSION_BUFFER"})
    return true;
  size_t i = 0;
  bool any = false;
  while (i < a.size()) {
    const size_t h = i + (at(i) == "PRESCALE" ? 1 : at(i) == "MEMCPY_IN_FUSION_BUFFER" ? 1 : 0);
    if (at(i) == "DIRECT_REDUCESCATTER" && at(i + 1) == "DIRECT_ALLGATHER") {
      i += 2;
    } else if (at(h) == "LOCAL_REDUCESCATTER") {
      // Hierarchical: within the host, across, within again; per piece
      // between the fusion buffer's copies, or once for one tensor.
      if (at(h + 1) != "CROSS_ALLREDUCE" || at(h + 2) != "LOCAL_ALLGATHER") return false;
      const bool fused = at(i) == "MEMCPY_IN_FUSION_BUFFER";
      if (fused && at(h + 3) != "MEMCPY_OUT_FUSION_BUFFER") return false;
      i = h + 3 + (fused ? 1 : 0);
    } else if (at(i) == "MEMCPY_IN_FUSION_BUFFER" && at(i + 1) == "RING_REDUCESCATTER" &&
               at(i + 2) == "RING_ALLGATHER" && at(i + 3) == "MEMCPY_OUT_FUSION_BUFFER") {
      i += 4;
    } else {
      size_t j = i + (at(i) == "PRESCALE" ? 1 : 0);  // one tensor on the ring
      if (at(j) != "RING_REDUCESCATTER" || at(j + 1) != "RING_ALLGATHER") return false;
      i = j + 2;  // the result is scaled within RING_REDUCESCATTER
    }
    any = true;
  }
  return any;
}

// Every allreduce op span: QUEUE, then a valid phase sequence.
void expect_allreduce_phases(const nlohmann::json& events) {
  const auto spans = allreduce_activities(events);
  EXPECT_FALSE(spans.empty());
  for (const auto& s : spans) {
    std::string text;
    for (const auto& n : s) text += n + " ";
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s[0], "QUEUE") << text;
    EXPECT_TRUE(is_allreduce_phase_sequence(std::vector<std::string>(s.begin() + 1, s.end())))
        << text;
  }
}

// Reads a timeline that the runtime has finished with (rank 0).
nlohmann::json read_timeline(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json events;
  EXPECT_NO_THROW(events = nlohmann::json::parse(text.str())) << text.str().substr(0, 2000);
  return events;
}

// A runtime created with RINGLET_ALGORITHM forced (the config is read at creation).
void recreate_runtime_with(const char* variable, const char* value) {
  g_rt.reset();
  const char* before = std::getenv(variable);
  // Restored also when the runtime refuses the setting, so that later tests
  // start from the job's own environment.
  struct Restore {
    const char* variable;
    std::optional<std::string> saved;
    ~Restore() {
      if (saved)
        ::setenv(variable, saved->c_str(), 1);
      else
        ::unsetenv(variable);
    }
  } restore{variable, before ? std::optional<std::string>(before) : std::nullopt};
  ::setenv(variable, value, 1);
  g_rt = make_runtime();
}

void recreate_runtime_with_algorithm(const char* algorithm) {
  recreate_runtime_with("RINGLET_ALGORITHM", algorithm);
}

// With the runtime just recreated under the setting a test wants: allreduces
// recorded in a timeline of their own until one was fused, then rank 0's
// allreduce spans (other ranks: none; a fused op must have run everywhere).
// The runtime is let go, so that later tests run with the table's choice again.
std::optional<std::vector<std::vector<std::string>>> fused_allreduce_spans(const std::string& stem,
                                                                          const char* tag) {
  const std::string path = "/tmp/ringlet_timeline_" + stem + "_" + std::to_string(::getppid()) +
                           ".json";
  rt().start_timeline(path, false);
  bool fused = false;
  for (int attempt = 0; attempt < 50 && !fused; ++attempt) fused = fused_step(tag, attempt);
  EXPECT_TRUE(fused);
  rt().stop_timeline();
  const bool writer = rt().rank() == 0;
  g_rt.reset();
  if (!writer) return std::nullopt;
  auto spans = allreduce_activities(read_timeline(path));
  std::remove(path.c_str());
  return spans;
}

TEST(Runtime, TimelineIsValidJsonWithExpectedEvents) {
  const std::string path = "/tmp/ringlet_timeline_" + std::to_string(::getppid()) + ".json";
  rt().start_timeline(path, true);
  bool fused = false;
  for (int attempt = 0; attempt < 50 && !fused; ++attempt) fused = fused_step("tl.", attempt);
  EXPECT_TRUE(fused);
  rt().stop_timeline();
  if (rt().rank() != 0) return;
  // The file is valid JSON at every moment; wait until the writer has the
  // last events (the loop drops its reference at the end of its cycle).
  nlohmann::json events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<std::string> names;
  while (true) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    ASSERT_NO_THROW(events = nlohmann::json::parse(text.str())) << text.str().substr(0, 2000);
    names.clear();
    for (const auto& e : events) names.push_back(e.value("name", ""));
    // Complete once every span has closed (the fused op's among them).
    int open = 0;
    for (const auto& e : events) open += e.value("ph", "") == "B" ? 1 : e.value("ph", "") == "E" ? -1 : 0;
    const bool has_op = std::find(names.begin(), names.end(), "ALLREDUCE") != names.end();
    if ((has_op && open == 0) || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(events.is_array());
  for (const char* want : {"NEGOTIATE_ALLREDUCE", "ALLREDUCE", "QUEUE", "CYCLE_START", "process_name"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  // Inside each op span: QUEUE, then the algorithm's phases (for the table's
  // choice here: ONESTEP_ALLREDUCE, or DIRECT_REDUCESCATTER, DIRECT_ALLGATHER).
  expect_allreduce_phases(events);
  // Each rank leaves an instant mark named after it in the negotiation span.
  for (int r = 0; r < rt().size(); ++r) {
    EXPECT_NE(std::find(names.begin(), names.end(), std::to_string(r)), names.end()) << "rank mark " << r;
  }
  // Spans balance per tensor.
  std::map<int, int> depth;
  for (const auto& e : events) {
    const std::string ph = e["ph"];
    if (ph == "B") ++depth[e["pid"].get<int>()];
    if (ph == "E") {
      ASSERT_GE(--depth[e["pid"].get<int>()], 0);
    }
  }
  for (auto [pid, d] : depth) EXPECT_EQ(d, 0) << "pid " << pid;
  std::remove(path.c_str());
}

// With the ring forced, a fused op runs per fusion piece MEMCPY_IN_FUSION_BUFFER,
// RING_REDUCESCATTER, RING_ALLGATHER, MEMCPY_OUT_FUSION_BUFFER (Horovod's
// names); every allreduce op span reduce-scatters before it allgathers.
TEST(Runtime, TimelineRingPhasesInOrder) {
  recreate_runtime_with_algorithm("ring");
  const auto recorded = fused_allreduce_spans("ring", "tlring.");
  if (!recorded) return;
  const auto& spans = *recorded;
  ASSERT_FALSE(spans.empty());
  bool saw_fused = false;
  for (const auto& s : spans) {
    std::string text;
    for (const auto& n : s) text += n + " ";
    const auto rs = std::find(s.begin(), s.end(), "RING_REDUCESCATTER");
    const auto ag = std::find(s.begin(), s.end(), "RING_ALLGATHER");
    ASSERT_NE(rs, s.end()) << text;
    ASSERT_NE(ag, s.end()) << text;
    EXPECT_LT(rs - s.begin(), ag - s.begin()) << text;
    EXPECT_EQ(s[0], "QUEUE") << text;
    EXPECT_TRUE(is_allreduce_phase_sequence(std::vector<std::string>(s.begin() + 1, s.end())))
        << text;
    saw_fused |=
        s == std::vector<std::string>{"QUEUE", "MEMCPY_IN_FUSION_BUFFER", "RING_REDUCESCATTER",
                                      "RING_ALLGATHER", "MEMCPY_OUT_FUSION_BUFFER"};
  }
  EXPECT_TRUE(saw_fused) << "no fused op with the fusion-buffer phases";
}

// With HOROVOD_HIERARCHICAL_ALLREDUCE=1 on two hosts of several ranks each
// (as_two_hosts.sh, a ctest entry of its own), a fused op runs per piece
// MEMCPY_IN_FUSION_BUFFER, LOCAL_REDUCESCATTER, CROSS_ALLREDUCE,
// LOCAL_ALLGATHER, MEMCPY_OUT_FUSION_BUFFER, and every allreduce span is a
// hierarchical sequence.
TEST(Runtime, TimelineHierarchicalPhasesInOrder) {
  const char* host = std::getenv("RINGLET_HOSTNAME");
  const bool two_hosts_of_several = host != nullptr &&
                                    std::string(host).rfind("simhost", 0) == 0 &&
                                    rt().size() >= 4 && rt().size() % 2 == 0 &&
                                    std::getenv("AS_TWO_HOSTS") == nullptr;
  if (!two_hosts_of_several) {
    GTEST_SKIP() << "needs two simulated hosts of as many ranks, several each (as_two_hosts.sh)";
  }
  recreate_runtime_with("HOROVOD_HIERARCHICAL_ALLREDUCE", "1");
  const auto recorded = fused_allreduce_spans("hierarchical", "tlhier.");
  if (!recorded) return;
  const auto& spans = *recorded;
  ASSERT_FALSE(spans.empty());
  bool saw_fused = false;
  for (const auto& s : spans) {
    std::string text;
    for (const auto& n : s) text += n + " ";
    EXPECT_EQ(s[0], "QUEUE") << text;
    EXPECT_NE(std::find(s.begin(), s.end(), "CROSS_ALLREDUCE"), s.end()) << text;
    EXPECT_TRUE(is_allreduce_phase_sequence(std::vector<std::string>(s.begin() + 1, s.end())))
        << text;
    saw_fused |= s == std::vector<std::string>{"QUEUE", "MEMCPY_IN_FUSION_BUFFER",
                                               "LOCAL_REDUCESCATTER", "CROSS_ALLREDUCE",
                                               "LOCAL_ALLGATHER", "MEMCPY_OUT_FUSION_BUFFER"};
  }
  EXPECT_TRUE(saw_fused) << "no fused op with the hierarchical phases";
}

// HOROVOD_CPU_OPERATIONS=MPI: Horovod's names for MPI's collectives. A fused
// op packs, runs MPI_ALLREDUCE and unpacks; the other collectives are one
// MPI_<COLLECTIVE> activity each.
TEST(Runtime, TimelineMpiPhasesAreHorovods) {
  if (!mpi_operations()) GTEST_SKIP() << "HOROVOD_CPU_OPERATIONS is not MPI";
  const int n = rt().size(), me = rt().rank();
  const std::string path = "/tmp/ringlet_timeline_mpi_" + std::to_string(::getppid()) + ".json";
  rt().start_timeline(path, false);
  bool fused = false;
  for (int attempt = 0; attempt < 50 && !fused; ++attempt) fused = fused_step("tlmpi.", attempt);
  EXPECT_TRUE(fused);
  std::vector<int32_t> mine(me + 1, me);
  std::vector<double> b(5, me == 0 ? 7.0 : 0.0);
  std::vector<float> rs(2 * n, 1.0f);
  std::vector<int64_t> a2a(n, me);
  const Handle hs[] = {
      rt().enqueue_allgather("tlmpi.ag", mine.data(), {me + 1}, DataType::kInt32),
      rt().enqueue_broadcast("tlmpi.bc", b.data(), {5}, DataType::kFloat64, 0),
      rt().enqueue_reducescatter("tlmpi.rs", rs.data(), {2 * n}, DataType::kFloat32, ReduceOp::kSum),
      rt().enqueue_alltoall("tlmpi.a2a", a2a.data(), {n}, DataType::kInt64, {}),
  };
  for (Handle h : hs) rt().synchronize(h);
  EXPECT_EQ(b[4], 7.0);
  rt().stop_timeline();
  const bool writer = me == 0;
  g_rt.reset();  // closes the timeline
  if (!writer) return;
  const nlohmann::json events = read_timeline(path);
  expect_allreduce_phases(events);
  bool saw_fused = false;
  for (const auto& s : allreduce_activities(events)) {
    saw_fused |= s == std::vector<std::string>{"QUEUE", "MEMCPY_IN_FUSION_BUFFER", "MPI_ALLREDUCE",
                                               "MEMCPY_OUT_FUSION_BUFFER"};
  }
  EXPECT_TRUE(saw_fused) << "no fused op with the fusion-buffer phases";
  std::set<std::string> names;
  for (const auto& e : events) names.insert(e.value("name", ""));
  for (const char* want : {"MPI_ALLGATHER", "MPI_BROADCAST", "MPI_REDUCESCATTER", "MPI_ALLTOALL"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  for (const auto& name : names) {
    EXPECT_EQ(name.find("RING_"), std::string::npos) << name;
    EXPECT_EQ(name.find("DIRECT_"), std::string::npos) << name;
  }
  std::remove(path.c_str());
}

// Run where HOROVOD_TIMELINE is set (a ctest entry of its own): rank 0
// writes from init to shutdown, with cycle marks.
TEST(Timeline, FromEnvironment) {
  const char* path = std::getenv("HOROVOD_TIMELINE");
  if (!path) GTEST_SKIP() << "HOROVOD_TIMELINE not set";
  bool fused = false;
  for (int attempt = 0; attempt < 50 && !fused; ++attempt) fused = fused_step("env.", attempt);
  EXPECT_TRUE(fused);
  const bool writer = rt().rank() == 0;
  g_rt.reset();  // closes the timeline
  if (!writer) return;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json events;
  ASSERT_NO_THROW(events = nlohmann::json::parse(text.str()));
  std::set<std::string> names;
  for (const auto& e : events) names.insert(e.value("name", ""));
  for (const char* want : {"NEGOTIATE_ALLREDUCE", "ALLREDUCE", "QUEUE", "CYCLE_START"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  expect_allreduce_phases(events);
  std::remove(path);
}

// Run only where the injection library is loaded (a ctest entry of its own).
TEST(Runtime, NvtxRangesInOrder) {
  const char* prefix = std::getenv("RINGLET_NVTX_RECORD");
  if (!prefix || !std::getenv("NVTX_INJECTION64_PATH")) GTEST_SKIP() << "no NVTX injection library loaded";
  // The ring, forced: its fused ops have every phase of Horovod's names.
  recreate_runtime_with_algorithm("ring");
  bool fused = false;
  for (int attempt = 0; attempt < 50 && !fused; ++attempt) fused = fused_step("nvtx.", attempt);
  g_rt.reset();
  ASSERT_TRUE(fused);
  const std::string path = std::string(prefix) + "." + std::to_string(::getpid());
  const char* off = std::getenv("RINGLET_NVTX");
  if (off && std::string(off) == "0") {
    // Off: NVTX is never even initialized, so the injection library never loads.
    std::ifstream in(path);
    std::string line;
    EXPECT_FALSE(in && std::getline(in, line)) << "RINGLET_NVTX=0 but a range was recorded: " << line;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_FALSE(lines.empty());
  for (const auto& l : lines) ASSERT_EQ(l.substr(0, 8), "Ringlet\t") << l;
  // In order (a subsequence): the API call, the negotiation, the fused op
  // with its phases.
  const std::vector<std::string> want = {"ENQUEUE",
                                         "NEGOTIATE",
                                         "ALLREDUCE float",
                                         "MEMCPY_IN_FUSION_BUFFER",
                                         "RING_REDUCESCATTER",
                                         "RING_ALLGATHER",
                                         "MEMCPY_OUT_FUSION_BUFFER"};
  // Search from the last fused op backwards for the phases, forwards for the rest.
  size_t w = 0;
  std::string fused_payload;
  for (const auto& l : lines) {
    if (w == want.size()) break;
    const std::string msg = l.substr(8, l.find('\t', 8) - 8);
    if (msg == want[w]) {
      if (want[w] == "ALLREDUCE float") fused_payload = l;
      ++w;
    } else if (w >= 3 && msg == "ALLREDUCE float") {
      w = 3;  // an unfused op: the phases must follow a later fused one
      fused_payload = l;
    }
  }
  EXPECT_EQ(w, want.size()) << "missing '" << (w < want.size() ? want[w] : "") << "' in order";
  // The caller's side: its time blocked on the others.
  bool synchronize = false;
  for (const auto& l : lines) synchronize |= l.substr(8, l.find('\t', 8) - 8) == "SYNCHRONIZE";
  EXPECT_TRUE(synchronize) << "no SYNCHRONIZE range";
  std::remove(path.c_str());
}

// An environment variable set for one scope (the runtime reads its
// configuration when it is created).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* before = std::getenv(name)) saved_ = before;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (saved_)
      ::setenv(name_, saved_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

// A name that one rank never submits fails on every rank that did, after
// RINGLET_STALL_TIMEOUT_SECONDS, naming the tensor and the missing rank, and
// the runtime goes on: once while the name waits in the negotiation table,
// once while it waits as a response-cache bit (with the cache on).
TEST(StallTimeout, FailsOnEveryRankThatSubmittedAndTheRuntimeGoesOn) {
  g_rt.reset();
  ScopedEnv timeout("RINGLET_STALL_TIMEOUT_SECONDS", "2");
  ScopedEnv warn("HOROVOD_STALL_CHECK_TIME_SECONDS", "1");
  g_rt = make_runtime();
  const int n = rt().size(), me = rt().rank(), missing = n - 1;
  std::vector<float> a(8, 1.0f);
  EXPECT_EQ(error_of(rt().enqueue_allreduce("cached.stall", a.data(), a.data(), {8}, DataType::kFloat32)), "");
  for (const std::string name : {"fresh.stall", "cached.stall"}) {
    if (me != missing) {
      const auto start = std::chrono::steady_clock::now();
      const Handle h = rt().enqueue_allreduce(name, a.data(), a.data(), {8}, DataType::kFloat32);
      try {
        rt().synchronize(h);
        ADD_FAILURE() << name << " completed without rank " << missing;
      } catch (const RuntimeError& e) {
        const std::string err = e.what();
        EXPECT_EQ(e.kind(), core::runtime::ErrorKind::kStalled) << err;
        EXPECT_NE(err.find("stall timeout (RINGLET_STALL_TIMEOUT_SECONDS=2)"), std::string::npos) << err;
        EXPECT_NE(err.find("'" + name + "'"), std::string::npos) << err;
        EXPECT_NE(err.find("for rank " + std::to_string(missing) + ", which never submitted it"),
                  std::string::npos)
            << err;
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      EXPECT_GE(waited, std::chrono::milliseconds(1900));
      EXPECT_LT(waited, std::chrono::seconds(20));
    } else {
      // Arrive at the next collective about when the others have given the
      // name up: well within the stall timeout of their arrival.
      std::this_thread::sleep_for(std::chrono::seconds(3));
    }
    // The runtime goes on: the next collective runs on every rank. (Checked
    // before it: after the last one, a rank that is done may shut down.)
    EXPECT_EQ(rt().stopped_reason(), "");
    std::vector<float> b(8, 1.0f);
    EXPECT_EQ(error_of(rt().enqueue_allreduce("after." + name, b.data(), b.data(), {8}, DataType::kFloat32)), "");
    EXPECT_EQ(b[0], static_cast<float>(n));
  }
  g_rt.reset();  // the later tests run with the defaults again
}

// Last: shutdown with work in flight, then init again.
TEST(LifeCycle, ShutdownWithPendingWorkThenInitAgain) {
  const int me = rt().rank();
  std::vector<float> a(8, 1.0f);
  Handle lonely = -1;
  if (me == 0) lonely = rt().enqueue_allreduce("lonely", a.data(), a.data(), {8}, DataType::kFloat32);
  // Once "fence" ran, rank 0 has reported "lonely" (in the same cycle or before).
  int one = 1;
  rt().synchronize(rt().enqueue_allreduce("fence", &one, &one, {1}, DataType::kInt32));
  rt().shutdown();
  if (me == 0) {
    const std::string err = error_of(lonely);
    EXPECT_NE(err.find("shut down"), std::string::npos) << err;
    EXPECT_NE(err.find("lonely"), std::string::npos) << err;
    EXPECT_NE(err.find("missing on rank"), std::string::npos) << err;
  }
  try {
    rt().enqueue_allreduce("after", a.data(), a.data(), {8}, DataType::kFloat32);
    ADD_FAILURE() << "enqueue after shutdown was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("stopped"), std::string::npos) << e.what();
  }
  g_rt.reset();
  // At once, without waiting for rank 0's old store to close: the client
  // refuses a store this process has finished with and retries.
  g_rt = make_runtime();
  a.assign(8, 2.0f);
  EXPECT_EQ(error_of(rt().enqueue_allreduce("again", a.data(), a.data(), {8}, DataType::kFloat32)), "");
  EXPECT_EQ(a[0], 2.0f * rt().size());
  g_rt.reset();
}

}  // namespace
}  // namespace ringlet::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  ringlet::test::g_rt.reset();
  return rc;
}
