// Process sets, run as N ranks through ringletrun:
//   ringletrun -np 4 process_set_test
// The runtime starts with two static sets, the even ranks (id 1) and the odd
// ranks (id 2); the tests use them side by side with the world and with sets
// added and removed at run time. Values are small integers, so every result
// is exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/mpi/mpi_bootstrap.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/runtime/runtime.h"

namespace ringlet::test {
namespace {

using core::runtime::ErrorKind;
using core::runtime::Handle;
using core::runtime::Runtime;
using core::runtime::RuntimeError;

std::unique_ptr<Runtime> g_rt;

std::vector<int> ranks_where(int size, bool odd) {
  std::vector<int> r;
  for (int i = odd ? 1 : 0; i < size; i += 2) r.push_back(i);
  return r;
}

Runtime& rt() {
  if (!g_rt) {
    core::LaunchInfo launch = core::detect_launch();
    // Under mpirun without RINGLET_RENDEZVOUS the ranks meet through MPI, as init() has them.
    if (core::needs_mpi_bootstrap(launch)) core::complete_launch_with_mpi(launch);
    auto comm = core::Communicator::create(core::load_config(), launch);
    const int n = comm->size();
    std::vector<std::vector<int>> sets = {ranks_where(n, false)};
    if (n > 1) sets.push_back(ranks_where(n, true));
    g_rt = std::make_unique<Runtime>(std::move(comm), std::move(sets));
  }
  return *g_rt;
}

// This rank's static set: 1 (even ranks) or 2 (odd ranks), and its members.
int32_t my_set() { return rt().rank() % 2 == 0 ? 1 : 2; }
std::vector<int> my_members() { return ranks_where(rt().size(), rt().rank() % 2 == 1); }

// The error a handle fails with, and its kind ("" / kInternal on success).
struct Failure {
  std::string what;
  ErrorKind kind = ErrorKind::kInternal;
};
Failure failure_of(Handle h) {
  try {
    rt().synchronize(h);
    return {};
  } catch (const RuntimeError& e) {
    return {e.what(), e.kind()};
  }
}

TEST(ProcessSets, StaticSetsExistOnEveryRank) {
  const int n = rt().size();
  const auto ids = rt().process_set_ids();
  ASSERT_EQ(ids.size(), n > 1 ? 3u : 2u);
  EXPECT_EQ(ids[0], 0);
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(rt().process_set_ranks(0), all);
  EXPECT_EQ(rt().process_set_ranks(1), ranks_where(n, false));
  if (n > 1) {
    EXPECT_EQ(rt().process_set_ranks(2), ranks_where(n, true));
  }
  try {
    rt().process_set_ranks(99);
    ADD_FAILURE() << "process_set_ranks(99) returned";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no process set 99"), std::string::npos) << e.what();
  }
}

// Hundreds of tensors on this rank's set and on the world at once, in a
// different order on every rank: each set sums only its members' values.
TEST(ProcessSets, SetsAndWorldRunSideBySide) {
  const int me = rt().rank(), n = rt().size();
  const std::vector<int> members = my_members();
  const int set_sum = std::accumulate(members.begin(), members.end(), 0);
  constexpr int kTensors = 200;
  std::vector<std::vector<int32_t>> set_bufs(kTensors), world_bufs(kTensors);
  std::vector<Handle> set_h(kTensors), world_h(kTensors);
  std::vector<int> order(2 * kTensors);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(99 + 31 * me);
  for (int step = 0; step < 3; ++step) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int k : order) {
      const int i = k % kTensors;
      if (k < kTensors) {
        set_bufs[i].assign(5 + i % 17, me + i);
        set_h[i] =
            rt().enqueue_allreduce("set.grad." + std::to_string(i), set_bufs[i].data(),
                                   set_bufs[i].data(), {static_cast<int64_t>(set_bufs[i].size())},
                                   DataType::kInt32, ReduceOp::kSum, 1.0, 1.0, {}, my_set());
      } else {
        world_bufs[i].assign(3 + i % 11, me * 2 + i);
        world_h[i] = rt().enqueue_allreduce(
            "world.grad." + std::to_string(i), world_bufs[i].data(), world_bufs[i].data(),
            {static_cast<int64_t>(world_bufs[i].size())}, DataType::kInt32, ReduceOp::kSum);
      }
    }
    for (int i = 0; i < kTensors; ++i) {
      rt().synchronize(set_h[i]);
      rt().synchronize(world_h[i]);
      const int32_t want_set = set_sum + static_cast<int32_t>(members.size()) * i;
      const int32_t want_world = n * (n - 1) + n * i;
      for (int32_t v : set_bufs[i])
        ASSERT_EQ(v, want_set) << "set tensor " << i << " step " << step;
      for (int32_t v : world_bufs[i])
        ASSERT_EQ(v, want_world) << "world tensor " << i << " step " << step;
    }
  }
}

// Average divides by the set's size, not the world's.
TEST(ProcessSets, AverageOverTheSet) {
  const int me = rt().rank();
  const std::vector<int> members = my_members();
  std::vector<float> buf(1000, static_cast<float>(me));
  rt().synchronize(rt().enqueue_allreduce("avg", buf.data(), buf.data(), {1000}, DataType::kFloat32,
                                          ReduceOp::kAvg, 1.0, 1.0, {}, my_set()));
  const float want =
      static_cast<float>(std::accumulate(members.begin(), members.end(), 0)) / members.size();
  for (float v : buf) ASSERT_FLOAT_EQ(v, want);
}

// The collectives whose sizes follow from the set: allgather concatenates
// the members in rank order, reducescatter and alltoall split over them, and
// a broadcast's root is a global rank.
TEST(ProcessSets, EveryCollectiveOnASet) {
  const int me = rt().rank();
  const std::vector<int> members = my_members();
  const int k = static_cast<int>(members.size());
  const int idx = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());

  // allgather: member j contributes j + 1 rows of 3, valued by its global rank.
  std::vector<int64_t> mine(static_cast<size_t>(3 * (idx + 1)), me);
  auto g = rt().synchronize(rt().enqueue_allgather("ps.gather", mine.data(), {idx + 1, 3},
                                                   DataType::kInt64, {}, my_set()));
  int64_t rows = 0;
  for (int j = 0; j < k; ++j) rows += j + 1;
  ASSERT_EQ(g.shape, (std::vector<int64_t>{rows, 3}));
  const auto* got = reinterpret_cast<const int64_t*>(g.data.data());
  for (int j = 0, at = 0; j < k; ++j) {
    for (int e = 0; e < 3 * (j + 1); ++e, ++at) ASSERT_EQ(got[at], members[j]) << "member " << j;
  }

  // broadcast from every member in turn (a global rank).
  for (int root : members) {
    std::vector<double> b(33, me == root ? 7.5 + root : -1.0);
    rt().synchronize(rt().enqueue_broadcast("ps.bcast." + std::to_string(root), b.data(), {33},
                                            DataType::kFloat64, root, {}, my_set()));
    for (double v : b) ASSERT_EQ(v, 7.5 + root) << "root " << root;
  }

  // reducescatter of 2k + 1 rows of 2: member j gets rows split as Horovod does.
  const int64_t d0 = 2 * k + 1;
  std::vector<int32_t> rs(static_cast<size_t>(d0 * 2));
  for (size_t e = 0; e < rs.size(); ++e) rs[e] = static_cast<int32_t>(e) + me;
  auto r = rt().synchronize(rt().enqueue_reducescatter(
      "ps.rs", rs.data(), {d0, 2}, DataType::kInt32, ReduceOp::kSum, 1.0, 1.0, {}, my_set()));
  const int64_t my_rows = d0 / k + (idx < d0 % k ? 1 : 0);
  int64_t first = 0;
  for (int j = 0; j < idx; ++j) first += d0 / k + (j < d0 % k ? 1 : 0);
  ASSERT_EQ(r.shape, (std::vector<int64_t>{my_rows, 2}));
  const int member_sum = std::accumulate(members.begin(), members.end(), 0);
  const auto* rv = reinterpret_cast<const int32_t*>(r.data.data());
  for (int64_t e = 0; e < my_rows * 2; ++e)
    ASSERT_EQ(rv[e], k * static_cast<int32_t>(first * 2 + e) + member_sum);

  // alltoall: member j sends j + 1 rows of its global rank to each member.
  std::vector<int64_t> splits(k, idx + 1);
  std::vector<float> a(static_cast<size_t>(k * (idx + 1)), static_cast<float>(me));
  auto t = rt().synchronize(rt().enqueue_alltoall("ps.a2a", a.data(), {k * (idx + 1)},
                                                  DataType::kFloat32, splits, {}, my_set()));
  std::vector<int64_t> want_splits(k);
  for (int j = 0; j < k; ++j) want_splits[j] = j + 1;
  EXPECT_EQ(t.received_splits, want_splits);
  const auto* tv = reinterpret_cast<const float*>(t.data.data());
  for (int j = 0, at = 0; j < k; ++j) {
    for (int e = 0; e <= j; ++e, ++at) ASSERT_EQ(tv[at], static_cast<float>(members[j]));
  }

  rt().barrier(my_set());
}

TEST(ProcessSets, CallsOutsideTheSetAreRefusedAtOnce) {
  const int me = rt().rank(), n = rt().size();
  if (n < 2) GTEST_SKIP() << "needs a set this rank is not in: at least 2 ranks";
  const int32_t other = my_set() == 1 ? 2 : 1;
  float x = 1;
  try {
    rt().enqueue_allreduce("outsider", &x, &x, {1}, DataType::kFloat32, ReduceOp::kSum, 1.0, 1.0,
                           {}, other);
    ADD_FAILURE() << "a collective on a set without this rank was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(
        std::string(e.what()).find("rank " + std::to_string(me) +
                                   " is not a member of process set " + std::to_string(other)),
        std::string::npos)
        << e.what();
  }
  try {
    rt().enqueue_allreduce("nowhere", &x, &x, {1}, DataType::kFloat32, ReduceOp::kSum, 1.0, 1.0, {},
                           42);
    ADD_FAILURE() << "a collective on an unknown set was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no process set 42"), std::string::npos) << e.what();
  }
  // A root outside the set.
  const int outsider = me % 2 == 0 ? 1 : 0;  // of the other parity
  try {
    rt().enqueue_broadcast("bad.root", &x, {1}, DataType::kFloat32, outsider, {}, my_set());
    ADD_FAILURE() << "a broadcast rooted outside the set was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("root " + std::to_string(outsider)), std::string::npos)
        << e.what();
  }
  // Nothing was left behind: the world still runs.
  int32_t v = 1;
  rt().synchronize(
      rt().enqueue_allreduce("after.refusals", &v, &v, {1}, DataType::kInt32, ReduceOp::kSum));
  EXPECT_EQ(v, n);
}

// A mismatch inside a set names the members by their global ranks.
TEST(ProcessSets, MismatchNamesGlobalRanks) {
  const int me = rt().rank();
  const std::vector<int> members = my_members();
  if (members.size() < 2) GTEST_SKIP() << "needs a set of two ranks: at least 3 ranks";
  std::vector<float> buf(static_cast<size_t>(4 + (me == members.back() ? 1 : 0)), 1.0f);
  const Failure f = failure_of(rt().enqueue_allreduce(
      "ps.mismatch", buf.data(), buf.data(), {static_cast<int64_t>(buf.size())}, DataType::kFloat32,
      ReduceOp::kSum, 1.0, 1.0, {}, my_set()));
  EXPECT_EQ(f.kind, ErrorKind::kMismatch) << f.what;
  const std::string want = "rank " + std::to_string(members.back()) + " sent [5]";
  EXPECT_NE(f.what.find(want), std::string::npos) << f.what;
}

TEST(ProcessSets, AddUseRemoveAtRunTime) {
  const int me = rt().rank(), n = rt().size();
  if (n < 3)
    GTEST_SKIP() << "at 2 ranks every subset is a set already (the world, the evens, the odds)";
  // Every rank but the last, and a set of one.
  std::vector<int> most(std::max(1, n - 1));
  std::iota(most.begin(), most.end(), 0);
  const int32_t a = rt().add_process_set(most);
  const int32_t solo = rt().add_process_set({n - 1});
  EXPECT_NE(a, solo);
  EXPECT_EQ(rt().process_set_ranks(a), most);
  EXPECT_EQ(rt().process_set_ranks(solo), std::vector<int>{n - 1});
  if (me < static_cast<int>(most.size())) {
    for (int round = 0; round < 20; ++round) {
      std::vector<int64_t> v(100, me + round);
      rt().synchronize(rt().enqueue_allreduce("dyn." + std::to_string(round), v.data(), v.data(),
                                              {100}, DataType::kInt64, ReduceOp::kSum, 1.0, 1.0, {},
                                              a));
      const int64_t k = static_cast<int64_t>(most.size());
      for (int64_t x : v) ASSERT_EQ(x, k * (k - 1) / 2 + k * round);
    }
  }
  if (me == n - 1) {
    double d = 2.5;
    rt().synchronize(rt().enqueue_allreduce("solo", &d, &d, {1}, DataType::kFloat64, ReduceOp::kSum,
                                            1.0, 1.0, {}, solo));
    EXPECT_EQ(d, 2.5);
  }
  rt().remove_process_set(a);
  rt().remove_process_set(solo);
  const auto ids = rt().process_set_ids();
  EXPECT_EQ(std::count(ids.begin(), ids.end(), a), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), solo), 0);
  // A removed set refuses new work; ids are not reused.
  float x = 0;
  EXPECT_THROW(rt().enqueue_allreduce("gone", &x, &x, {1}, DataType::kFloat32, ReduceOp::kSum, 1.0,
                                      1.0, {}, a),
               RuntimeError);
  const int32_t again = rt().add_process_set(most);
  EXPECT_GT(again, solo);
  rt().remove_process_set(again);
}

TEST(ProcessSets, ChangesAreCheckedOnEveryRank) {
  const int me = rt().rank(), n = rt().size();
  // The same ranks as a static set.
  try {
    rt().add_process_set(ranks_where(n, false));
    ADD_FAILURE() << "a set with the ranks of set 1 was added";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("process set 1 already holds ranks"), std::string::npos)
        << e.what();
  }
  // Bad ranks are refused locally, before the other ranks are involved.
  EXPECT_THROW(rt().add_process_set({n}), RuntimeError);
  EXPECT_THROW(rt().add_process_set({0, 0}), RuntimeError);
  EXPECT_THROW(rt().add_process_set({}), RuntimeError);
  EXPECT_THROW(rt().remove_process_set(0), RuntimeError);
  EXPECT_THROW(rt().remove_process_set(1234), RuntimeError);
  // The world's ranks are set 0's.
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_THROW(rt().add_process_set(all), RuntimeError);
  if (n < 3) return;  // below, two different two-rank sets that are not the world
  // Different arguments on different ranks: a mismatch on every rank, and no set.
  const auto before = rt().process_set_ids();
  try {
    rt().add_process_set({0, me == 0 ? 1 : n - 1});
    ADD_FAILURE() << "mismatched add_process_set calls succeeded";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kMismatch);
    EXPECT_NE(std::string(e.what()).find("Mismatched process set changes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(rt().process_set_ids(), before);
}

// Removing a set fails what is still waiting on it there.
TEST(ProcessSets, RemovingFailsPendingWork) {
  const int me = rt().rank(), n = rt().size();
  if (n < 3)
    GTEST_SKIP() << "at 2 ranks every subset is a set already (the world, the evens, the odds)";
  const std::vector<int> first = {0, 1};
  const int32_t id = rt().add_process_set(first);
  Handle h = 0;
  float x = 1;
  // Only rank 0 submits: the name can never be ready on every member.
  if (me == 0) {
    h = rt().enqueue_allreduce("never.ready", &x, &x, {1}, DataType::kFloat32, ReduceOp::kSum, 1.0,
                               1.0, {}, id);
  }
  rt().barrier();  // rank 0 has submitted before anyone removes
  rt().remove_process_set(id);
  if (me == 0) {
    const Failure f = failure_of(h);
    EXPECT_EQ(f.kind, ErrorKind::kShutdown) << f.what;
    EXPECT_NE(f.what.find("process set " + std::to_string(id) + " was removed"), std::string::npos)
        << f.what;
  }
  // Again with the removal right behind the submission: the runtime may pick
  // both up in the same cycle, before the name was ever reported.
  const int32_t id2 = rt().add_process_set(first);
  if (me == 0) {
    h = rt().enqueue_allreduce("never.ready.2", &x, &x, {1}, DataType::kFloat32, ReduceOp::kSum, 1.0,
                               1.0, {}, id2);
  }
  rt().remove_process_set(id2);
  if (me == 0) {
    const Failure f = failure_of(h);
    EXPECT_EQ(f.kind, ErrorKind::kShutdown) << f.what;
    EXPECT_NE(f.what.find("process set " + std::to_string(id2) + " was removed"), std::string::npos)
        << f.what;
  }
}

// Run alone with HOROVOD_STALL_SHUTDOWN_TIME_SECONDS set (see CMakeLists.txt):
// a name only one member of a set submits stops the whole job, naming the
// member that did not submit by its global rank, and the set.
TEST(ProcessSetStall, ShutdownNamesTheSetAndTheMissingRank) {
  if (std::getenv("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS") == nullptr) {
    GTEST_SKIP() << "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS not set";
  }
  const int me = rt().rank(), n = rt().size();
  if (n < 3) GTEST_SKIP() << "needs a set of two ranks: at least 3 ranks";
  const std::vector<int> evens = ranks_where(n, false);
  float x = 1;
  if (me == 0) {
    const Failure f = failure_of(rt().enqueue_allreduce("stuck", &x, &x, {1}, DataType::kFloat32,
                                                        ReduceOp::kSum, 1.0, 1.0, {}, 1));
    EXPECT_EQ(f.kind, ErrorKind::kStalled) << f.what;
    EXPECT_NE(f.what.find("in process set 1"), std::string::npos) << f.what;
    EXPECT_NE(f.what.find("rank " + std::to_string(evens[1]) + " has not submitted 'stuck'"),
              std::string::npos)
        << f.what;
  } else {
    // Every other rank learns of it at the same cycle.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (rt().stopped_reason().empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_NE(rt().stopped_reason().find("stall shutdown"), std::string::npos)
        << rt().stopped_reason();
  }
}

// Run alone with RINGLET_STALL_TIMEOUT_SECONDS=2 (see CMakeLists.txt): a name
// one member of a set never submits fails on the member that did, naming the
// set and the missing member by its global rank; the set and the world go on.
TEST(ProcessSetStallTimeout, FailsTheCollectiveAndTheSetGoesOn) {
  const char* timeout = std::getenv("RINGLET_STALL_TIMEOUT_SECONDS");
  if (timeout == nullptr || std::string(timeout) != "2") {
    GTEST_SKIP() << "RINGLET_STALL_TIMEOUT_SECONDS=2 not set";
  }
  const int me = rt().rank(), n = rt().size();
  if (n < 3) GTEST_SKIP() << "needs a set of two ranks: at least 3 ranks";
  const std::vector<int> evens = ranks_where(n, false);
  float x = 1;
  if (me == 0) {
    const Failure f = failure_of(rt().enqueue_allreduce("stuck", &x, &x, {1}, DataType::kFloat32,
                                                        ReduceOp::kSum, 1.0, 1.0, {}, 1));
    EXPECT_EQ(f.kind, ErrorKind::kStalled) << f.what;
    EXPECT_NE(f.what.find("'stuck' in process set 1 waited 2 s for rank " +
                          std::to_string(evens[1]) + ", which never submitted it"),
              std::string::npos)
        << f.what;
  } else {
    // About when rank 0 gave up: well within the stall timeout of its
    // arrival at the next collectives (the set's, then the world's).
    std::this_thread::sleep_for(std::chrono::seconds(3));
  }
  EXPECT_EQ(rt().stopped_reason(), "");
  if (me % 2 == 0) {
    float y = 1;
    EXPECT_EQ(failure_of(rt().enqueue_allreduce("after.stuck", &y, &y, {1}, DataType::kFloat32,
                                                ReduceOp::kSum, 1.0, 1.0, {}, 1))
                  .what,
              "");
    EXPECT_EQ(y, static_cast<float>(evens.size()));
  }
  rt().barrier();
}

}  // namespace
}  // namespace ringlet::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  ringlet::test::g_rt.reset();
  return rc;
}
