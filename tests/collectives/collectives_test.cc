// Multi-rank tests of the collectives, run as N ranks through ringletrun:
//   ringletrun -np 4 collectives_test
// with RINGLET_ALGORITHM (auto|ring|direct) and RINGLET_TRANSPORT (shm|tcp)
// choosing the path under test, or through mpirun with
// HOROVOD_CPU_OPERATIONS=MPI for MPI's collectives (the Mpi.* tests run only
// there). Every rank runs the same tests in the same
// order (the collectives must be called symmetrically) and checks the whole
// result itself. Values are small integers so that every result is exact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/mpi/mpi_bootstrap.h"
#include "core/collectives/algorithm_table.h"
#include "core/collectives/collectives.h"
#include "core/collectives/workspace.h"
#include "core/communicator.h"
#include "rank_main.h"
#include "test_values.h"
#include "tests/common/throws_failure.h"

namespace ringlet::test {
namespace {

using core::Communicator;

Communicator* g_comm = nullptr;
Communicator& comm() { return *g_comm; }

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                  DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                                  DataType::kInt32,   DataType::kInt64,   DataType::kInt16,
                                  DataType::kUInt16};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kAvg};

std::string label(DataType t, ReduceOp op, size_t count, bool in_place) {
  return std::string(to_string(t)) + "/" + std::string(to_string(op)) + "/" +
         std::to_string(count) + (in_place ? "/in-place" : "/out-of-place");
}

// Runs one allreduce and checks every element; returns false on a mismatch.
void check_allreduce(DataType t, ReduceOp op, size_t count, bool in_place) {
  const int n = comm().size();
  const int me = comm().rank();
  Buffer send(t, count), recv(t, count);
  const Periodic mine = values_of(t, op, me), want = expected_of(t, op, n);
  for (size_t i = 0; i < count; ++i) send.set(i, mine(i));
  Buffer& out = in_place ? send : recv;
  core::allreduce(comm(), send.data(), out.data(), count, t, op);
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!close_enough(t, op, out[i], want(i))) {
      if (wrong++ == 0) first = i;
    }
  }
  EXPECT_EQ(wrong, 0u) << label(t, op, count, in_place) << ": first wrong at " << first << ": got "
                       << out[first] << ", want " << expected(t, op, n, first);
  EXPECT_TRUE(out.guard_intact()) << label(t, op, count, in_place);
}

std::vector<size_t> small_counts() {
  const size_t n = comm().size();
  return {0, 1, 2, n - 1, n + 1, 1000};
}

// A process started without a launcher is a world of one with no rendezvous
// store (the commonest start of all: `python train.py`). Nothing may reach for
// the store there: asking for it is an error that says why, never a null
// reference; every collective still runs (the other tests, in the ctest entry
// collectives_np1_no_launcher).
TEST(WorldOfOne, WithoutALauncherThereIsNoStoreAndAskingSaysSo) {
  if (comm().has_store()) {
    EXPECT_GE(comm().store().add("collectives_test/store-asked", 1), 1);
    return;
  }
  EXPECT_EQ(comm().size(), 1);
  try {
    comm().store();
    ADD_FAILURE() << "store() of a world without one returned";
  } catch (const common::Failure& f) {
    EXPECT_EQ(f.kind(), common::FailureKind::kInternal);
    EXPECT_NE(std::string(f.what()).find("started without a launcher has no rendezvous store"),
              std::string::npos)
        << f.what();
  }
}

TEST(Allreduce, EveryTypeOpAndSmallSize) {
  for (DataType t : kAllTypes)
    for (ReduceOp op : kAllOps)
      for (size_t count : small_counts())
        for (bool in_place : {false, true}) check_allreduce(t, op, count, in_place);
}

TEST(Allreduce, LargeSizes) {
  const size_t big = 1000003;
  for (DataType t : kAllTypes) check_allreduce(t, ReduceOp::kSum, big, false);
  for (ReduceOp op : kAllOps) {
    check_allreduce(DataType::kFloat32, op, big, true);
    check_allreduce(DataType::kInt8, op, big, op == ReduceOp::kMax);
  }
  int k = 0;
  for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt32}) {
    const size_t five_mib = (size_t{5} << 20) / dtype_size(t) + 7;
    check_allreduce(t, ReduceOp::kSum, five_mib, k++ % 2 == 0);
    check_allreduce(t, ReduceOp::kAvg, five_mib, k++ % 2 == 0);
  }
}

TEST(Allreduce, ManySmallInARow) {
  // Round counters and flags must agree across thousands of calls.
  for (int i = 0; i < 300; ++i) check_allreduce(DataType::kFloat32, ReduceOp::kSum, 1 + i % 37, i % 2);
}

// Horovod's scaling of one value: none where the factor is 1.0, else one
// product in double, integers truncated toward zero.
double scale_value(DataType t, double v, double factor) {
  if (factor == 1.0) return v;
  const double p = v * factor;
  return is_floating(t) ? p : std::trunc(p);
}

// The one factor of a result: the postscale, divided by the ranks for an
// average (Horovod runs an average as a sum with postscale / size).
double result_factor(ReduceOp op, double post, int n) {
  return op == ReduceOp::kAvg ? post / n : post;
}

// allreduce_segments: tensor i of `counts` holds elements [start_i, start_i +
// counts[i]) of the message, whose element x rank r fills with value(r, x);
// the result is op(prescale * value) scaled once by result_factor.
double segments_expected(DataType t, ReduceOp op, int n, size_t x, double pre, double post) {
  double acc = 0;
  for (int r = 0; r < n; ++r) {
    const double v = scale_value(t, value(t, op, r, x), pre);
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  return scale_value(t, acc, result_factor(op, post, n));
}

// Every tensor in place when in_place is 1, none when 0, every other one when 2.
void check_segments(DataType t, ReduceOp op, const std::vector<size_t>& counts, int in_place,
                    double pre, double post) {
  const int n = comm().size();
  const int me = comm().rank();
  Periodic mine, want;
  for (size_t i = 0; i < kPeriod; ++i) {
    mine.v[i] = value(t, op, me, i);
    want.v[i] = segments_expected(t, op, n, i, pre, post);
  }
  std::vector<Buffer> send, recv;
  send.reserve(counts.size());
  recv.reserve(counts.size());
  std::vector<kernels::cpu::ConstSegment> in;
  std::vector<kernels::cpu::Segment> out;
  size_t x = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    send.emplace_back(t, counts[i]);
    recv.emplace_back(t, counts[i]);
    for (size_t j = 0; j < counts[i]; ++j) send[i].set(j, mine(x + j));
    x += counts[i];
    const bool here = in_place == 1 || (in_place == 2 && i % 2 == 0);
    in.push_back({send[i].data(), counts[i]});
    out.push_back({here ? send[i].data() : recv[i].data(), counts[i]});
  }
  core::allreduce_segments(comm(), in, out, t, op, pre, post);
  const std::string what = std::string(to_string(t)) + "/" + std::string(to_string(op)) + " x" +
                           std::to_string(counts.size()) + " total " + std::to_string(x) + " pre " +
                           std::to_string(pre) + " post " + std::to_string(post) + " in_place " +
                           std::to_string(in_place);
  x = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const bool here = in_place == 1 || (in_place == 2 && i % 2 == 0);
    const Buffer& got = here ? send[i] : recv[i];
    size_t wrong = 0, first = 0;
    for (size_t j = 0; j < counts[i]; ++j) {
      if (!close_enough(t, op, got[j], want(x + j)) && wrong++ == 0) first = j;
    }
    ASSERT_EQ(wrong, 0u) << what << ": tensor " << i << " element " << first << ": got "
                         << got[first] << ", want " << want(x + first);
    EXPECT_TRUE(send[i].guard_intact() && recv[i].guard_intact()) << what << ": tensor " << i;
    if (!here) {  // the input is left alone
      for (size_t j = 0; j < counts[i]; ++j)
        ASSERT_EQ(send[i][j], mine(x + j)) << what << ": tensor " << i;
    }
    x += counts[i];
  }
}

// Scale pairs that keep every float result exact (but an average's) and every
// integer in range: (2, 1/2) and (1.5, 2.5), which truncate integers (-1.5
// gives -1, where rounding gave -2), for sums, averages and extremes; for
// products (-1, 2) on signed types (|product| <= 32).
std::vector<std::pair<double, double>> scale_pairs(DataType t, ReduceOp op) {
  if (op != ReduceOp::kProd) return {{1.0, 1.0}, {2.0, 0.5}, {1.5, 2.5}};
  return {{1.0, 1.0}, {is_unsigned(t) ? 1.0 : -1.0, 2.0}};
}

const std::vector<std::vector<size_t>>& segment_lists() {
  static const std::vector<std::vector<size_t>> lists = [] {
    std::vector<std::vector<size_t>> l = {{}, {0}, {5}, {0, 0, 7}, {1, 0, 3, 0, 0, 17, 1000, 5}};
    std::vector<size_t> many;  // zero-length ones among odd sizes
    for (size_t i = 0; i < 60; ++i) many.push_back(i % 7 == 3 ? 0 : (i * 37) % 1013);
    l.push_back(many);
    return l;
  }();
  return lists;
}

TEST(Allreduce, SegmentsEveryTypeOpAndScale) {
  for (DataType t : kAllTypes)
    for (ReduceOp op : kAllOps)
      for (auto [pre, post] : scale_pairs(t, op))
        for (const auto& counts : segment_lists())
          for (int in_place : {0, 1, 2}) check_segments(t, op, counts, in_place, pre, post);
}

// Larger than a window round and a fusion piece, with tensors straddling the
// rounds; with the default tuning, then with rounds, slices and fusion pieces
// far smaller than a tensor, then with streamed output.
TEST(Allreduce, SegmentsLarge) {
  std::vector<size_t> counts;
  for (size_t i = 0; i < 40; ++i) counts.push_back(i % 9 == 4 ? 0 : 65536 + i * 331);
  core::collectives::Tuning& tune = comm().workspace().tuning;
  const core::collectives::Tuning saved = tune;
  for (int mode = 0; mode < 3; ++mode) {
    tune = saved;
    if (mode == 1) {
      tune.direct_round_bytes = 48 << 10;
      tune.direct_slice_bytes = 5 << 10;
      tune.fusion_piece_bytes = 40 << 10;
    }
    if (mode == 2) tune.stream_min_bytes = 0;
    check_segments(DataType::kFloat32, ReduceOp::kSum, counts, mode % 3, 1.0, 1.0);
    check_segments(DataType::kFloat32, ReduceOp::kAvg, counts, 2, 2.0, 0.5);
    check_segments(DataType::kBFloat16, ReduceOp::kMax, counts, 1, 2.0, 0.5);
    check_segments(DataType::kInt32, ReduceOp::kAvg, counts, 0, 2.0, 0.5);
    check_segments(DataType::kInt16, ReduceOp::kAvg, counts, 1, 1.5, 2.5);
    check_segments(DataType::kInt8, ReduceOp::kProd, counts, 2, -1.0, 2.0);
  }
  tune = saved;
}

// The phases an observer is told: flat, in order, one set per algorithm.
TEST(Allreduce, SegmentsReportPhases) {
  PhaseRecorder rec;
  for (size_t count : {size_t{100}, size_t{3} << 20}) {
    std::vector<float> a(count, 1.0f), b(count, 2.0f);
    const std::vector<kernels::cpu::ConstSegment> in = {{a.data(), count}, {b.data(), count}};
    const std::vector<kernels::cpu::Segment> out = {{a.data(), count}, {b.data(), count}};
    rec.seen.clear();
    comm().workspace().phases = &rec;
    core::allreduce_segments(comm(), in, out, DataType::kFloat32, ReduceOp::kSum);
    comm().workspace().phases = nullptr;
    EXPECT_EQ(rec.open, 0);
    ASSERT_EQ(a[count - 1], comm().size());
    if (comm().size() == 1) {
      EXPECT_EQ(rec.seen, std::vector<std::string>{"LOCAL_COPY"});
      continue;
    }
    const auto algo = core::collectives::choose_algorithm(
        comm(), core::collectives::Collective::kAllreduce, 2 * count * sizeof(float));
    ASSERT_FALSE(rec.seen.empty());
    switch (algo) {
      case core::collectives::Algorithm::kOneStep:
        EXPECT_EQ(rec.seen, std::vector<std::string>{"ONESTEP_ALLREDUCE"});
        break;
      case core::collectives::Algorithm::kRing:
        // Per fusion piece: in, reduce-scatter, allgather, out.
        ASSERT_EQ(rec.seen.size() % 4, 0u);
        for (size_t i = 0; i < rec.seen.size(); i += 4) {
          EXPECT_EQ(std::vector<std::string>(rec.seen.begin() + i, rec.seen.begin() + i + 4),
                    (std::vector<std::string>{"MEMCPY_IN_FUSION_BUFFER", "RING_REDUCESCATTER",
                                              "RING_ALLGATHER", "MEMCPY_OUT_FUSION_BUFFER"}));
        }
        break;
      case core::collectives::Algorithm::kDirect:
        // Per round: reduce-scatter, then allgather.
        ASSERT_EQ(rec.seen.size() % 2, 0u);
        for (size_t i = 0; i < rec.seen.size(); i += 2) {
          EXPECT_EQ(rec.seen[i], "DIRECT_REDUCESCATTER");
          EXPECT_EQ(rec.seen[i + 1], "DIRECT_ALLGATHER");
        }
        break;
      case core::collectives::Algorithm::kHierarchical:
        // Per piece: in, within the host, across hosts, within again, out.
        ASSERT_EQ(rec.seen.size() % 5, 0u);
        for (size_t i = 0; i < rec.seen.size(); i += 5) {
          EXPECT_EQ(std::vector<std::string>(rec.seen.begin() + i, rec.seen.begin() + i + 5),
                    (std::vector<std::string>{"MEMCPY_IN_FUSION_BUFFER", "LOCAL_REDUCESCATTER",
                                              "CROSS_ALLREDUCE", "LOCAL_ALLGATHER",
                                              "MEMCPY_OUT_FUSION_BUFFER"}));
        }
        break;
      case core::collectives::Algorithm::kMpi:
        // Horovod's MPI allreduce of fused tensors: one call over the fusion buffer.
        EXPECT_EQ(rec.seen, (std::vector<std::string>{"MEMCPY_IN_FUSION_BUFFER", "MPI_ALLREDUCE",
                                                      "MEMCPY_OUT_FUSION_BUFFER"}));
        break;
      case core::collectives::Algorithm::kTwoShot:
        ADD_FAILURE() << "twoshot is a device algorithm; host memory runs direct in its place";
        break;
    }
  }
}

TEST(Allreduce, SegmentsRejectMismatchedCounts) {
  float a[4] = {}, b[4] = {};
  const std::vector<kernels::cpu::ConstSegment> in = {{a, 4}};
  const std::vector<kernels::cpu::Segment> out = {{b, 3}};
  const auto kInvalid = common::FailureKind::kInvalidArgument;
  EXPECT_TRUE(test::throws_failure(kInvalid, [&] {
    core::allreduce_segments(comm(), in, out, DataType::kFloat32, ReduceOp::kSum);
  }));
  EXPECT_TRUE(test::throws_failure(kInvalid, [&] {
    core::allreduce_segments(comm(), in, {}, DataType::kFloat32, ReduceOp::kSum);
  }));
}

// Per-rank counts for allgather and reducescatter.
std::vector<size_t> pattern(int which, size_t k) {
  const int n = comm().size();
  std::vector<size_t> c(n);
  for (int r = 0; r < n; ++r) {
    switch (which) {
      case 0: c[r] = k; break;                           // even
      case 1: c[r] = (r + 1) * k + r; break;             // uneven
      case 2: c[r] = r % 2 == 0 ? 0 : k + r; break;      // some ranks give nothing
      default: c[r] = r == n - 1 ? k : 0; break;         // one rank gives all
    }
  }
  return c;
}

void check_allgather(DataType t, const std::vector<size_t>& counts, bool in_place) {
  const int n = comm().size();
  const int me = comm().rank();
  std::vector<size_t> off(n + 1, 0);
  for (int r = 0; r < n; ++r) off[r + 1] = off[r] + counts[r];
  Buffer recv(t, off[n]), send(t, counts[me]);
  for (size_t i = 0; i < off[n]; ++i) recv.set(i, 3);
  Buffer& src = send;
  std::vector<Periodic> of(n);
  for (int r = 0; r < n; ++r) of[r] = values_of(t, ReduceOp::kSum, r);
  for (size_t j = 0; j < counts[me]; ++j) src.set(j, of[me](j));
  const void* send_ptr = send.data();
  if (in_place) {
    for (size_t j = 0; j < counts[me]; ++j) recv.set(off[me] + j, of[me](j));
    send_ptr = recv.at(off[me]);
  }
  core::allgather(comm(), send_ptr, recv.data(), counts, t);
  size_t wrong = 0;
  for (int r = 0; r < n; ++r)
    for (size_t j = 0; j < counts[r]; ++j)
      wrong += recv[off[r] + j] != of[r](j);
  EXPECT_EQ(wrong, 0u) << to_string(t) << " total " << off[n] << (in_place ? " in place" : "");
  EXPECT_TRUE(recv.guard_intact());
}

TEST(Allgather, CountPatterns) {
  for (int p = 0; p < 4; ++p)
    for (size_t k : {size_t{1}, size_t{7}, size_t{1000}})
      for (DataType t : kAllTypes)
        for (bool in_place : {false, true}) check_allgather(t, pattern(p, k), in_place);
  check_allgather(DataType::kFloat32, pattern(1, 300007), false);
  check_allgather(DataType::kInt8, pattern(2, 1000003), true);
  check_allgather(DataType::kFloat64, pattern(0, 700001), true);
}

// The result: op over the ranks (an average as a sum), scaled once by
// result_factor(op, post, n).
void check_reducescatter(DataType t, ReduceOp op, const std::vector<size_t>& counts, bool in_place,
                         double post = 1.0) {
  const int n = comm().size();
  const int me = comm().rank();
  std::vector<size_t> off(n + 1, 0);
  for (int r = 0; r < n; ++r) off[r + 1] = off[r] + counts[r];
  Buffer send(t, off[n]), recv(t, counts[me]);
  const Periodic mine = values_of(t, op, me);
  const Periodic reduced = expected_of(t, op == ReduceOp::kAvg ? ReduceOp::kSum : op, n);
  Periodic want;
  for (size_t i = 0; i < kPeriod; ++i) {
    want.v[i] = scale_value(t, reduced.v[i], result_factor(op, post, n));
  }
  for (size_t i = 0; i < off[n]; ++i) send.set(i, mine(i));
  void* out = in_place ? static_cast<void*>(send.at(off[me])) : recv.data();
  core::reducescatter(comm(), send.data(), out, counts, t, op, post);
  size_t wrong = 0, first = 0;
  for (size_t j = 0; j < counts[me]; ++j) {
    const double got = get(t, out, j);
    if (!close_enough(t, op, got, want(off[me] + j)) && wrong++ == 0) first = j;
  }
  EXPECT_EQ(wrong, 0u) << label(t, op, off[n], in_place) << " post " << post << " first wrong at "
                       << first << ": got " << get(t, out, first) << ", want "
                       << want(off[me] + first);
  EXPECT_TRUE(send.guard_intact() && recv.guard_intact());
}

TEST(Reducescatter, CountPatternsAndOps) {
  for (int p = 0; p < 4; ++p)
    for (size_t k : {size_t{1}, size_t{9}, size_t{1000}})
      for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt8, DataType::kInt64})
        for (ReduceOp op : kAllOps)
          for (bool in_place : {false, true}) check_reducescatter(t, op, pattern(p, k), in_place);
  for (DataType t : kAllTypes) check_reducescatter(t, ReduceOp::kSum, pattern(1, 1003), t == DataType::kInt32);
  check_reducescatter(DataType::kFloat32, ReduceOp::kSum, pattern(0, 1000003), false);
  check_reducescatter(DataType::kBFloat16, ReduceOp::kMax, pattern(2, 2000003), true);
}

// The postscale is applied once, with an average's 1/n joined to it: an
// integer average with a postscale truncates sum * (post / n).
TEST(Reducescatter, PostscaleJoinsTheAverage) {
  for (DataType t : kAllTypes)
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax})
      for (double post : {1.0, 2.5, 0.5})
        for (int p : {0, 1}) check_reducescatter(t, op, pattern(p, 1001), p == 1, post);
  // Past a ring slot and a window round, with every slice scaled by its owner.
  check_reducescatter(DataType::kInt32, ReduceOp::kAvg, pattern(1, 700001), false, 2.5);
  check_reducescatter(DataType::kFloat32, ReduceOp::kAvg, pattern(0, 700001), true, 1.5);
}

// Elements rank `src` sends to rank `dst`, under pattern `which`; symmetric
// so that send and receive layouts coincide (in place is meaningful).
size_t split(int which, int a, int b, size_t k) {
  switch (which) {
    case 0: return k;
    case 1: return ((a + b) % 3) * k + (a == b ? 1 : 0);
    default: return ((a + b) % 2) * k;
  }
}
double a2a_value(int src, int dst, size_t j) { return static_cast<double>((src * 5 + dst * 3 + j) % 7); }

void check_alltoall(DataType t, int which, size_t k, bool in_place) {
  const int n = comm().size();
  const int me = comm().rank();
  std::vector<size_t> sc(n), rc(n), soff(n + 1, 0), roff(n + 1, 0);
  for (int r = 0; r < n; ++r) {
    sc[r] = split(which, me, r, k);
    rc[r] = split(which, r, me, k);
    soff[r + 1] = soff[r] + sc[r];
    roff[r + 1] = roff[r] + rc[r];
  }
  Buffer send(t, soff[n]), recv(t, roff[n]);
  for (int d = 0; d < n; ++d)
    for (size_t j = 0; j < sc[d]; ++j) send.set(soff[d] + j, a2a_value(me, d, j));
  Buffer& out = in_place ? send : recv;
  core::alltoall(comm(), send.data(), sc, out.data(), rc, t);
  size_t wrong = 0;
  for (int s = 0; s < n; ++s)
    for (size_t j = 0; j < rc[s]; ++j) wrong += out[roff[s] + j] != a2a_value(s, me, j);
  EXPECT_EQ(wrong, 0u) << to_string(t) << " pattern " << which << " k " << k << (in_place ? " in place" : "");
  EXPECT_TRUE(out.guard_intact());
}

TEST(Alltoall, SplitPatterns) {
  for (int which = 0; which < 3; ++which)
    for (size_t k : {size_t{0}, size_t{1}, size_t{5}, size_t{1000}})
      for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt8, DataType::kInt64})
        for (bool in_place : {false, true}) check_alltoall(t, which, k, in_place);
  check_alltoall(DataType::kFloat32, 1, 400003, false);
  check_alltoall(DataType::kInt8, 0, 3000017, true);  // several window rounds, in place
}

void check_broadcast(DataType t, size_t count, int root) {
  const int me = comm().rank();
  Buffer buf(t, count);
  const Periodic of_root = values_of(t, ReduceOp::kSum, root);
  for (size_t i = 0; i < count; ++i) buf.set(i, me == root ? of_root(i) : 4);
  core::broadcast(comm(), buf.data(), count, t, root);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += buf[i] != of_root(i);
  EXPECT_EQ(wrong, 0u) << to_string(t) << " count " << count << " root " << root;
  EXPECT_TRUE(buf.guard_intact());
}

TEST(Broadcast, EveryRoot) {
  for (int root = 0; root < comm().size(); ++root) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}})
      for (DataType t : kAllTypes) check_broadcast(t, count, root);
    check_broadcast(DataType::kFloat32, 1000003, root);
  }
  check_broadcast(DataType::kUInt8, (size_t{20} << 20) + 3, comm().size() - 1);  // several rounds
}

// This rank's host as the job sees it, found here without the library:
// RINGLET_HOSTNAME where a test simulates hosts, gethostname() otherwise.
std::string own_host_name() {
  if (const char* simulated = std::getenv("RINGLET_HOSTNAME"); simulated && *simulated) {
    return simulated;
  }
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

TEST(Placement, MatchesTheHosts) {
  // Every rank publishes its own host name under a key of its own; the
  // placement the communicator derived must follow from those names: the
  // hosts counted, the ranks sharing this one, and the shared window present
  // exactly when every rank is on one host and the transport allows shared
  // memory. Under as_two_hosts.sh the job spans two hosts: no window, the ring
  // over UCX between the hosts (TCP in builds without UCX) and shm pairs within.
  const int n = comm().size(), me = comm().rank();
  std::vector<std::string> hosts(n);
  hosts[me] = own_host_name();
  if (n > 1) {
    const std::string mine = hosts[me];
    comm().store().set("placement_test/host/" + std::to_string(me), {mine.begin(), mine.end()});
    for (int r = 0; r < n; ++r) {
      if (r == me) continue;
      auto bytes = comm().store().get("placement_test/host/" + std::to_string(r), comm().deadline());
      hosts[r].assign(bytes.begin(), bytes.end());
    }
  }
  std::set<std::string> distinct(hosts.begin(), hosts.end());
  const int on_my_host = static_cast<int>(std::count(hosts.begin(), hosts.end(), hosts[me]));
  EXPECT_EQ(comm().world().hostnames, hosts);
  EXPECT_EQ(comm().world().cross_size, static_cast<int>(distinct.size()));
  EXPECT_EQ(comm().world().local_size, on_my_host);

  const char* transport = std::getenv("RINGLET_TRANSPORT");
  const std::string kind = transport != nullptr && *transport != 0 ? transport : "auto";
  // tcp and ucx carry every pair, within a host too: no window then.
  const bool one_carrier = kind == "tcp" || kind == "ucx";
  const bool window_expected = n > 1 && distinct.size() == 1 && !one_carrier;
  EXPECT_EQ(comm().window() != nullptr, window_expected)
      << "hosts: " << distinct.size() << ", RINGLET_TRANSPORT=" << kind;

  // Which carriers exist, seen from outside: each publishes this rank's
  // address in the store when it is made. auto: shm where a host holds two
  // ranks or more; between hosts TCP, also in builds with UCX.
  if (n > 1) {
    bool shared_host = false;
    for (const std::string& h : distinct) {
      shared_host |= std::count(hosts.begin(), hosts.end(), h) > 1;
    }
    const bool several_hosts = distinct.size() > 1;
    const bool auto_kind = kind == "auto";
    const bool want_shm = (auto_kind || kind == "shm") && shared_host;
    const bool want_ucx = kind == "ucx";
    const bool want_tcp = kind == "tcp" || (auto_kind && several_hosts);
    auto published = [&](const std::string& key) {
      try {
        comm().store().get(key, transport::Clock::now() + std::chrono::milliseconds(300));
        return true;
      } catch (const std::exception&) {
        return false;
      }
    };
    const std::string me_text = std::to_string(me);
    EXPECT_EQ(published("shm/rank/" + me_text), want_shm) << "RINGLET_TRANSPORT=" << kind;
    EXPECT_EQ(published("ucx/addr/" + me_text), want_ucx) << "RINGLET_TRANSPORT=" << kind;
    EXPECT_EQ(published("tcp/addr/" + me_text), want_tcp) << "RINGLET_TRANSPORT=" << kind;
    // UCX is loaded only by a process that makes a UCX carrier: its memory
    // hooks stay out of every other process.
    std::ifstream maps("/proc/self/maps");
    const std::string mapped((std::istreambuf_iterator<char>(maps)),
                             std::istreambuf_iterator<char>());
    EXPECT_EQ(mapped.find("libucp.so") != std::string::npos, want_ucx)
        << "RINGLET_TRANSPORT=" << kind;
  }
  const char* simulated = std::getenv("RINGLET_HOSTNAME");
  if (simulated != nullptr && std::string(simulated).rfind("simhost", 0) == 0 && n > 1) {
    EXPECT_EQ(comm().world().cross_size, 2);
    EXPECT_EQ(comm().window(), nullptr);
  }
  // The launcher's hint, where it gave one, agrees with what the names say.
  if (const char* local = std::getenv("RINGLET_LOCAL_SIZE")) {
    EXPECT_EQ(std::atoi(local), on_my_host);
  }
  if (n > 1) core::barrier(comm());  // nobody leaves while others still read the keys
}

TEST(Barrier, Repeated) {
  // A barrier returns only once every rank has entered it. Each rank counts
  // itself in a store counter before entering; one rank, a different one each
  // round, arrives late. Whoever leaves round i must then see every rank's
  // count for rounds 0..i: a barrier that let a rank through early fails here.
  const int n = comm().size(), me = comm().rank();
  const std::string key = "barrier_test/entered";
  for (int i = 0; i < 50; ++i) {
    if (n > 1) {
      if (i % n == me) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      comm().store().add(key, 1);
    }
    core::barrier(comm());
    if (n > 1) {
      const int64_t entered = comm().store().add(key, 0);
      // EXPECT, not ASSERT: every rank must go on to the same barriers.
      EXPECT_GE(entered, int64_t{n} * (i + 1)) << "round " << i << ": the barrier let rank " << me
                                              << " through before every rank had entered";
    }
  }
  core::barrier(comm());  // nobody starts the next test while others still read the counter
}

TEST(Mixed, InterleavedCollectives) {
  // Every algorithm advances the window's rounds; interleaving them checks
  // that all ranks keep counting alike.
  for (int i = 0; i < 20; ++i) {
    check_allreduce(DataType::kInt32, ReduceOp::kSum, 10 + i * 1000, i % 2);
    check_allgather(DataType::kFloat32, pattern(i % 4, 3 + i), i % 3 == 0);
    check_broadcast(DataType::kInt64, 100 + i, i % comm().size());
    check_reducescatter(DataType::kFloat64, ReduceOp::kMax, pattern((i + 1) % 4, 5 + i), i % 2);
    check_alltoall(DataType::kUInt8, i % 3, i, i % 2);
    core::barrier(comm());
  }
}

// A NaN on one rank makes the minimum and the maximum NaN, on every path:
// the kernels propagate it, and MPI's own MPI_MIN/MPI_MAX, which leave NaN
// undefined, are not used for floating types.
TEST(Allreduce, MinMaxPropagateNaN) {
  const int n = comm().size();
  const int me = comm().rank();
  const size_t count = 3 * static_cast<size_t>(n) + 5;
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16})
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      Buffer buf(t, count);
      // Element i is NaN on rank i % n only (every rank, where n == 1).
      for (size_t i = 0; i < count; ++i) buf.set(i, i % n == static_cast<size_t>(me) ? NAN : me + 1.0);
      core::allreduce(comm(), buf.data(), buf.data(), count, t, op);
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) wrong += !std::isnan(buf[i]);
      EXPECT_EQ(wrong, 0u) << to_string(t) << "/" << to_string(op);
    }
}

// HOROVOD_CPU_OPERATIONS=MPI: these run where the job asks for MPI's
// collectives (under mpirun; the ctest entries that do fail on a skip).
bool mpi_operations() {
  const char* v = std::getenv("HOROVOD_CPU_OPERATIONS");
  return v != nullptr && (std::string(v) == "MPI" || std::string(v) == "mpi");
}

TEST(Mpi, EveryCollectivePicksMpi) {
  if (!mpi_operations()) GTEST_SKIP() << "HOROVOD_CPU_OPERATIONS is not MPI";
  ASSERT_EQ(comm().mpi() != nullptr, comm().size() > 1);
  using core::collectives::Collective;
  for (Collective c : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                       Collective::kReducescatter, Collective::kAlltoall, Collective::kBarrier})
    for (size_t bytes : {size_t{0}, size_t{4}, size_t{1} << 20, size_t{1} << 32}) {
      EXPECT_EQ(core::collectives::choose_algorithm(comm(), c, bytes),
                core::collectives::Algorithm::kMpi)
          << to_string(c) << " " << bytes;
    }
}

// Horovod's timeline names for MPI's allreduce: a lone tensor is MPI_ALLREDUCE
// (PRESCALE first where it is scaled), fused tensors go through the fusion buffer.
TEST(Mpi, AllreducePhasesAreHorovods) {
  if (!mpi_operations()) GTEST_SKIP() << "HOROVOD_CPU_OPERATIONS is not MPI";
  struct Recorder final : core::collectives::PhaseObserver {
    std::vector<std::string> seen;
    void begin(const char* phase, size_t, size_t) override { seen.push_back(phase); }
    void end() override {}
  } rec;
  const int n = comm().size();
  std::vector<float> a(1000, 1.0f), b(300, 2.0f);
  auto run = [&](size_t tensors, double pre) {
    const std::vector<kernels::cpu::ConstSegment> in = {{a.data(), a.size()}, {b.data(), b.size()}};
    const std::vector<kernels::cpu::Segment> out = {{a.data(), a.size()}, {b.data(), b.size()}};
    rec.seen.clear();
    comm().workspace().phases = &rec;
    core::allreduce_segments(comm(), std::span(in).first(tensors), std::span(out).first(tensors),
                             DataType::kFloat32, ReduceOp::kSum, pre, 1.0);
    comm().workspace().phases = nullptr;
  };
  run(1, 1.0);
  EXPECT_EQ(rec.seen, std::vector<std::string>{"MPI_ALLREDUCE"});
  EXPECT_EQ(a[999], n);
  run(1, 2.0);
  EXPECT_EQ(rec.seen, (std::vector<std::string>{"PRESCALE", "MPI_ALLREDUCE"}));
  EXPECT_EQ(a[999], 2.0 * n * n);
  run(2, 1.0);
  EXPECT_EQ(rec.seen, (std::vector<std::string>{"MEMCPY_IN_FUSION_BUFFER", "MPI_ALLREDUCE",
                                                "MEMCPY_OUT_FUSION_BUFFER"}));
  EXPECT_EQ(a[0], 2.0 * n * n * n);
  EXPECT_EQ(b[299], 2.0 * n);
}

// A process set's communicator gets an MPI communicator of its own over its
// members (MPI_Comm_create_group), whose rank order is the set's: the even
// ranks and the odd ranks each reduce, gather and broadcast among themselves.
TEST(Mpi, ProcessSetsHaveTheirOwnMpiCommunicator) {
  if (!mpi_operations()) GTEST_SKIP() << "HOROVOD_CPU_OPERATIONS is not MPI";
  const int n = comm().size(), me = comm().rank();
  std::vector<int> members;
  for (int r = me % 2; r < n; r += 2) members.push_back(r);
  const int m = static_cast<int>(members.size());
  auto set = core::Communicator::create_subset(comm(), members, me % 2 ? "mpi_test_odd" : "mpi_test_even");
  ASSERT_EQ(set->mpi() != nullptr, m > 1);
  ASSERT_EQ(set->global_rank(set->rank()), me);
  int64_t sum = me + 1;
  core::allreduce(*set, &sum, &sum, 1, DataType::kInt64, ReduceOp::kSum);
  int64_t want = 0;
  for (int r : members) want += r + 1;
  EXPECT_EQ(sum, want);
  std::vector<int32_t> gathered(m, -1);
  const int32_t mine = 10 * me;
  const std::vector<size_t> ones(m, 1);
  core::allgather(*set, &mine, gathered.data(), ones, DataType::kInt32);
  for (int i = 0; i < m; ++i) EXPECT_EQ(gathered[i], 10 * members[i]) << i;
  int16_t from_last = static_cast<int16_t>(me == members.back() ? 77 : 0);
  core::broadcast(*set, &from_last, 1, DataType::kInt16, m - 1);
  EXPECT_EQ(from_last, 77);
  core::barrier(*set);
  set.reset();   // MPI_Comm_free on the members
  core::barrier(comm());
}

// Messages past the most one MPI call may carry (MPI's int counts) go in
// pieces, or as per-rank broadcasts, reduces and pairwise exchanges: reached
// here with a limit of 5 elements.
TEST(Mpi, MessagesPastTheCountLimitGoInPieces) {
  if (!mpi_operations()) GTEST_SKIP() << "HOROVOD_CPU_OPERATIONS is not MPI";
  core::collectives::Tuning& tune = comm().workspace().tuning;
  const core::collectives::Tuning saved = tune;
  tune.mpi_max_count = 5;
  for (bool in_place : {false, true}) {
    check_allreduce(DataType::kInt32, ReduceOp::kSum, 23, in_place);
    check_allreduce(DataType::kFloat16, ReduceOp::kMax, 17, in_place);
    check_allreduce(DataType::kInt8, ReduceOp::kAvg, 11, in_place);
    check_allgather(DataType::kInt8, pattern(1, 3), in_place);
    check_allgather(DataType::kBFloat16, pattern(2, 6), in_place);
    check_reducescatter(DataType::kFloat32, ReduceOp::kSum, pattern(1, 4), in_place, 2.5);
    check_reducescatter(DataType::kInt64, ReduceOp::kAvg, pattern(0, 7), in_place);
    check_alltoall(DataType::kInt64, 1, 4, in_place);
    check_alltoall(DataType::kUInt16, 0, 6, in_place);
  }
  for (int in_place : {0, 1, 2}) {
    check_segments(DataType::kInt16, ReduceOp::kAvg, {3, 0, 11, 7}, in_place, 2.0, 0.5);
    check_segments(DataType::kBFloat16, ReduceOp::kSum, {9, 1}, in_place, 1.5, 2.5);
  }
  check_broadcast(DataType::kUInt8, 23, comm().size() - 1);
  tune = saved;
}

// More than 2^31 elements of int8 (2.2 GB per buffer): run only under
// RINGLET_TEST_LARGE=1 (the ctest entry labelled 'large'), at np=2.
TEST(Large, CountAbove2Pow31) {
  if (std::getenv("RINGLET_TEST_LARGE") == nullptr) GTEST_SKIP() << "set RINGLET_TEST_LARGE=1";
  const size_t count = (size_t{1} << 31) + 4099;
  std::vector<int8_t> buf(count);
  const int me = comm().rank();
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<int8_t>((i + me) % 3);
  core::allreduce(comm(), buf.data(), buf.data(), count, DataType::kInt8, ReduceOp::kSum);
  const int n = comm().size();
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    int want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<int>((i + r) % 3);
    wrong += buf[i] != want;
  }
  EXPECT_EQ(wrong, 0u);
}


}  // namespace
}  // namespace ringlet::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<ringlet::core::Communicator> comm;
  try {
    ringlet::core::LaunchInfo launch = ringlet::core::detect_launch();
    // Under mpirun without RINGLET_RENDEZVOUS the ranks meet through MPI, as init() has them.
    if (ringlet::core::needs_mpi_bootstrap(launch)) ringlet::core::complete_launch_with_mpi(launch);
    comm = ringlet::core::Communicator::create(ringlet::core::load_config(), launch);
  } catch (const std::exception& e) {
    std::cerr << "collectives_test: could not create the communicator: " << e.what() << std::endl;
    return 2;
  }
  ringlet::test::g_comm = comm.get();
  ringlet::test::report_on_rank_zero(comm->rank());
  int rc = 0;
  try {
    rc = RUN_ALL_TESTS();
    ringlet::core::barrier(*comm);
    ringlet::test::leave_together(*comm, "collectives_test");
  } catch (const std::exception& e) {
    std::cerr << "collectives_test: " << e.what() << std::endl;
    rc = 3;
  }
  return rc;
}
