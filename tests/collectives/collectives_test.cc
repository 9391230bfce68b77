// Multi-rank tests of the collectives, run as N ranks through ringletrun:
//   ringletrun -np 4 collectives_test
// with RINGLET_ALGORITHM (auto|ring|direct) and RINGLET_TRANSPORT (shm|tcp)
// choosing the path under test. Every rank runs the same tests in the same
// order (the collectives must be called symmetrically) and checks the whole
// result itself. Values are small integers so that every result is exact.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/collectives/collectives.h"
#include "core/communicator.h"
#include "test_values.h"

namespace ringlet::test {
namespace {

using core::Communicator;

Communicator* g_comm = nullptr;
Communicator& comm() { return *g_comm; }

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                  DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                                  DataType::kInt32,   DataType::kInt64};
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

void check_reducescatter(DataType t, ReduceOp op, const std::vector<size_t>& counts, bool in_place) {
  const int n = comm().size();
  const int me = comm().rank();
  std::vector<size_t> off(n + 1, 0);
  for (int r = 0; r < n; ++r) off[r + 1] = off[r] + counts[r];
  Buffer send(t, off[n]), recv(t, counts[me]);
  const Periodic mine = values_of(t, op, me), want = expected_of(t, op, n);
  for (size_t i = 0; i < off[n]; ++i) send.set(i, mine(i));
  void* out = in_place ? static_cast<void*>(send.at(off[me])) : recv.data();
  core::reducescatter(comm(), send.data(), out, counts, t, op);
  size_t wrong = 0, first = 0;
  for (size_t j = 0; j < counts[me]; ++j) {
    const double got = get(t, out, j);
    if (!close_enough(t, op, got, want(off[me] + j)) && wrong++ == 0) first = j;
  }
  EXPECT_EQ(wrong, 0u) << label(t, op, off[n], in_place) << " first wrong at " << first;
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

TEST(Placement, MatchesTheHosts) {
  // Under as_two_hosts.sh the job spans two hosts: no window, ring over tcp
  // between the hosts and shm pairs within.
  const char* host = std::getenv("RINGLET_HOSTNAME");
  if (host != nullptr && std::string(host).rfind("simhost", 0) == 0 && comm().size() > 1) {
    EXPECT_EQ(comm().world().cross_size, 2);
    EXPECT_EQ(comm().window(), nullptr);
  } else if (comm().size() > 1 && std::getenv("RINGLET_TRANSPORT") != nullptr &&
             std::string(std::getenv("RINGLET_TRANSPORT")) == "shm") {
    EXPECT_NE(comm().window(), nullptr);
  }
}

TEST(Barrier, Repeated) {
  for (int i = 0; i < 50; ++i) core::barrier(comm());
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

// Non-zero ranks print only their failures, each line prefixed with the rank.
class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed()) {
      std::cerr << "[rank " << rank_ << "] " << (r.file_name() ? r.file_name() : "") << ":"
                << r.line_number() << ": " << r.summary() << std::endl;
    }
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace ringlet::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<ringlet::core::Communicator> comm;
  try {
    comm = ringlet::core::Communicator::create(ringlet::core::load_config(),
                                                ringlet::core::detect_launch());
  } catch (const std::exception& e) {
    std::cerr << "collectives_test: could not create the communicator: " << e.what() << std::endl;
    return 2;
  }
  ringlet::test::g_comm = comm.get();
  if (comm->rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new ringlet::test::FailurePrinter(comm->rank()));
  }
  int rc = 0;
  try {
    rc = RUN_ALL_TESTS();
    ringlet::core::barrier(*comm);
    // Leave together: a rank that closes its links while a peer is still
    // finishing the last collective can make that peer see it as lost.
    // Rank 0 serves the store, so it leaves last.
    if (comm->size() > 1) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      comm->store().barrier("collectives_test/exit", comm->size(), deadline);
      if (comm->rank() != 0) {
        comm->store().add("collectives_test/left", 1);
      } else {
        while (comm->store().add("collectives_test/left", 0) < comm->size() - 1 &&
               std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "collectives_test: " << e.what() << std::endl;
    rc = 3;
  }
  return rc;
}
