// The hierarchical allreduce and allgather, run as N ranks under ringletrun
// on simulated hosts (as_two_hosts.sh):
//   ringletrun -np 4 as_two_hosts.sh hierarchical_test
// Each test computes the layout itself, from the host name every rank
// publishes (not from the library), and checks the library against it: the
// groups, the choice of algorithm under HOROVOD_HIERARCHICAL_ALLREDUCE /
// _ALLGATHER as this process's environment sets them, and the results. The
// hierarchical algorithms and the flat ring run side by side on the same
// inputs: with small integer values every result is exact, so the two must
// agree bit for bit (and with the expected values) in every dtype and op; with
// values whose sums round, a floating sum or average is reduced in another
// order, so both are checked against a double-precision reference instead.
// Every rank runs the same tests in the same order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/collectives/algorithm_table.h"
#include "core/collectives/algorithms.h"
#include "core/collectives/collectives.h"
#include "core/collectives/workspace.h"
#include "core/communicator.h"
#include "ringlet/common/logging.h"
#include "rank_main.h"
#include "test_values.h"

namespace ringlet::test {
namespace {

using core::Communicator;
using core::collectives::Algorithm;
using core::collectives::Collective;

Communicator* g_world = nullptr;
Communicator& world() { return *g_world; }
// The process sets' communicators: released before the world's.
std::vector<std::unique_ptr<Communicator>> g_sets;

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                  DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                                  DataType::kInt32,   DataType::kInt64,   DataType::kInt16,
                                  DataType::kUInt16};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kAvg};

// ---------------------------------------------------------------------------
// The layout, as the test finds it.

// This rank's host: RINGLET_HOSTNAME where the test simulates hosts.
std::string own_host_name() {
  if (const char* simulated = std::getenv("RINGLET_HOSTNAME"); simulated && *simulated) {
    return simulated;
  }
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Every world rank's host name, through the store under keys of the test's own.
const std::vector<std::string>& host_names() {
  static const std::vector<std::string> names = [] {
    const int n = world().size(), me = world().rank();
    std::vector<std::string> hosts(n);
    hosts[me] = own_host_name();
    if (n > 1) {
      world().store().set("hierarchical_test/host/" + std::to_string(me),
                          {hosts[me].begin(), hosts[me].end()});
      for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        const auto v = world().store().get("hierarchical_test/host/" + std::to_string(r),
                                           world().deadline());
        hosts[r].assign(v.begin(), v.end());
      }
    }
    return hosts;
  }();
  return names;
}

// The layout of some world ranks (ascending): their hosts in the order of
// each host's lowest rank, and the ranks' indices (0..) on each.
struct Layout {
  std::vector<std::vector<int>> hosts;  // per host: indices into `members`
  int host_of(int index) const {
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (std::find(hosts[h].begin(), hosts[h].end(), index) != hosts[h].end()) return int(h);
    }
    return -1;
  }
  bool shared() const {
    return std::any_of(hosts.begin(), hosts.end(), [](const auto& h) { return h.size() > 1; });
  }
  bool even() const {
    return std::all_of(hosts.begin(), hosts.end(),
                       [&](const auto& h) { return h.size() == hosts.front().size(); });
  }
  // The placement where each hierarchical algorithm runs.
  bool allgather_layers() const { return hosts.size() > 1 && shared(); }
  bool allreduce_layers() const { return allgather_layers() && even(); }
};

Layout layout_of(const std::vector<int>& members) {
  Layout l;
  std::vector<std::string> seen;
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string& h = host_names()[members[i]];
    const auto at = std::find(seen.begin(), seen.end(), h);
    if (at == seen.end()) {
      seen.push_back(h);
      l.hosts.push_back({int(i)});
    } else {
      l.hosts[at - seen.begin()].push_back(int(i));
    }
  }
  return l;
}

std::vector<int> all_ranks() {
  std::vector<int> r(world().size());
  for (int i = 0; i < world().size(); ++i) r[i] = i;
  return r;
}

// A communicator under test with its members (world ranks) and layout.
struct Group {
  Communicator* comm;  // null where this rank is not a member
  std::vector<int> members;
  Layout layout;
};

// 1, 0 or unset, as this process's environment sets the switch.
std::string switch_of(const char* var) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == 0) return "unset";
  const std::string s = v;
  return (s == "1" || s == "true" || s == "TRUE") ? "1" : "0";
}

// What the library logs at `level` and above while `body` runs.
template <class F>
std::string logged_while(common::LogLevel level, F&& body) {
  const common::LogSettings before = common::log_settings();
  char path[] = "/tmp/hierarchical_test_log_XXXXXX";
  const int fd = ::mkstemp(path);
  common::LogSettings s = before;
  s.level = level;
  s.fd = fd;
  common::configure_log(s);
  body();
  common::configure_log(before);
  std::string text;
  char buf[4096];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t got; (got = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, size_t(got));
  ::close(fd);
  ::unlink(path);
  return text;
}

// ---------------------------------------------------------------------------
// Values.

// Exact mode: test_values.h's small integers (every result exact in every
// dtype). Otherwise values whose sums round in every floating type.
double input(DataType t, ReduceOp op, int r, size_t x, bool exact) {
  if (exact) return value(t, op, r, x);
  return static_cast<double>((x * 7919 + static_cast<size_t>(r) * 104729) % 1000) / 997.0 - 0.47;
}

// The value as the dtype holds it (inputs are rounded when written).
double as_stored(DataType t, double v) {
  std::byte b[8];
  put(t, b, 0, v);
  return get(t, b, 0);
}

// Horovod's scaling of one value: none where the factor is 1.0, else one
// product in double, integers truncated toward zero.
double scale_value(DataType t, double v, double factor) {
  if (factor == 1.0) return v;
  const double p = v * factor;
  return is_floating(t) ? p : std::trunc(p);
}

// The expected element x of the result on `n` ranks: op over the prescaled
// inputs, then the postscale (an average's 1/n joined to it) once.
double reference(DataType t, ReduceOp op, int n, size_t x, double pre, double post, bool exact) {
  double acc = 0;
  for (int r = 0; r < n; ++r) {
    const double v = as_stored(t, scale_value(t, as_stored(t, input(t, op, r, x, exact)), pre));
    acc = r == 0 ? v : combine(op, acc, v);
  }
  const double factor = op == ReduceOp::kAvg ? post / n : post;
  return scale_value(t, acc, factor);
}

// How far a rounded sum may be from the reference: a relative error per
// addition for each dtype, times the magnitude of what was added.
double tolerance(DataType t, int n, double magnitude) {
  const double per_step = t == DataType::kFloat64   ? 1e-15
                          : t == DataType::kFloat32 ? 1.2e-7
                          : t == DataType::kFloat16 ? 1e-3
                                                    : 8e-3;
  return (n + 2) * per_step * std::max(1.0, magnitude);
}

// ---------------------------------------------------------------------------
// Allreduce: the hierarchical algorithm against the flat ring.

struct Tensors {
  std::vector<Buffer> send, recv;
  std::vector<kernels::cpu::ConstSegment> in;
  std::vector<kernels::cpu::Segment> out;
};

// Every tensor in place when in_place is 1, none when 0, every other one when 2.
Tensors make_tensors(DataType t, ReduceOp op, int me, const std::vector<size_t>& counts,
                     int in_place, bool exact) {
  Tensors ts;
  ts.send.reserve(counts.size());
  ts.recv.reserve(counts.size());
  size_t x = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    ts.send.emplace_back(t, counts[i]);
    ts.recv.emplace_back(t, counts[i]);
    for (size_t j = 0; j < counts[i]; ++j) ts.send[i].set(j, input(t, op, me, x + j, exact));
    x += counts[i];
    const bool here = in_place == 1 || (in_place == 2 && i % 2 == 0);
    ts.in.push_back({ts.send[i].data(), counts[i]});
    ts.out.push_back({here ? ts.send[i].data() : ts.recv[i].data(), counts[i]});
  }
  return ts;
}

core::collectives::Segments segments_of(const Tensors& ts, std::vector<size_t>& start,
                                        DataType t) {
  start.assign(ts.in.size() + 1, 0);
  for (size_t i = 0; i < ts.in.size(); ++i) start[i + 1] = start[i] + ts.in[i].count;
  return {ts.in, ts.out, start.data(), start.back(), t, dtype_size(t)};
}

std::string what(DataType t, ReduceOp op, const std::vector<size_t>& counts, int in_place,
                 double pre, double post, bool exact) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  return std::string(to_string(t)) + "/" + std::string(to_string(op)) + " x" +
         std::to_string(counts.size()) + " total " + std::to_string(total) + " pre " +
         std::to_string(pre) + " post " + std::to_string(post) + " in_place " +
         std::to_string(in_place) + (exact ? " exact" : " rounding");
}

// Runs the flat ring and the hierarchical allreduce on the same inputs and
// compares them with each other and with the reference.
void compare_allreduce(Communicator& comm, DataType t, ReduceOp op,
                       const std::vector<size_t>& counts, int in_place, double pre, double post,
                       bool exact) {
  const int n = comm.size(), me = comm.rank();
  Tensors flat = make_tensors(t, op, me, counts, in_place, exact);
  Tensors layered = make_tensors(t, op, me, counts, in_place, exact);
  std::vector<size_t> start_flat, start_layered;
  const auto s_flat = segments_of(flat, start_flat, t);
  const auto s_layered = segments_of(layered, start_layered, t);
  if (s_flat.total == 0) return;  // the entry points return before any algorithm
  core::collectives::ring_allreduce_segments(comm, s_flat, op, pre, post);
  core::collectives::hierarchical_allreduce(comm, s_layered, op, pre, post);
  const std::string label = what(t, op, counts, in_place, pre, post, exact);
  const size_t es = dtype_size(t);
  size_t x = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const void* a = flat.out[i].data;
    const void* b = layered.out[i].data;
    if (exact) {
      ASSERT_EQ(std::memcmp(a, b, counts[i] * es), 0) << label << ": tensor " << i
                                                      << " differs from the flat ring";
    }
    size_t wrong = 0, first = 0;
    double got_first = 0, want_first = 0;
    for (size_t j = 0; j < counts[i]; ++j) {
      const double want = reference(t, op, n, x + j, pre, post, exact);
      const double got_flat = get(t, a, j), got = get(t, b, j);
      bool ok;
      if (exact) {
        // Exact but an average in a floating type, whose 1/n rounds.
        ok = close_enough(t, op, got, want) && close_enough(t, op, got_flat, want);
      } else {
        double magnitude = 0;
        for (int r = 0; r < n; ++r) magnitude += std::fabs(input(t, op, r, x + j, false) * pre);
        magnitude *= std::fabs(op == ReduceOp::kAvg ? post / n : post);
        const double tol = tolerance(t, n, magnitude);
        ok = std::fabs(got - want) <= tol && std::fabs(got_flat - want) <= tol;
      }
      if (!ok && wrong++ == 0) {
        first = j;
        got_first = got;
        want_first = want;
      }
    }
    ASSERT_EQ(wrong, 0u) << label << ": tensor " << i << " element " << first << ": got "
                         << got_first << ", want " << want_first;
    EXPECT_TRUE(layered.send[i].guard_intact() && layered.recv[i].guard_intact()) << label;
    const bool here = in_place == 1 || (in_place == 2 && i % 2 == 0);
    if (!here) {  // the input is left alone
      for (size_t j = 0; j < counts[i]; ++j) {
        ASSERT_EQ(layered.send[i][j], as_stored(t, input(t, op, me, x + j, exact))) << label;
      }
    }
    x += counts[i];
  }
}

// Scale pairs that keep every exact result exact (see collectives_test.cc).
std::vector<std::pair<double, double>> scale_pairs(DataType t, ReduceOp op) {
  if (op != ReduceOp::kProd) return {{1.0, 1.0}, {2.0, 0.5}, {1.5, 2.5}};
  return {{1.0, 1.0}, {is_unsigned(t) ? 1.0 : -1.0, 2.0}};
}

// Lone tensors around the local size (fewer elements than ranks on a host
// leave some parts empty), and fused lists with empty tensors.
std::vector<std::vector<size_t>> count_lists(int local_size) {
  const size_t l = static_cast<size_t>(local_size);
  std::vector<std::vector<size_t>> lists = {{1}, {l - 1}, {l + 1}, {1000}, {0, 0, 7},
                                            {1, 0, 3, 0, 0, 17, 1000, 5}};
  std::vector<size_t> many;
  for (size_t i = 0; i < 40; ++i) many.push_back(i % 7 == 3 ? 0 : (i * 37) % 1013);
  lists.push_back(many);
  return lists;
}

bool world_has_allreduce_layers() { return layout_of(all_ranks()).allreduce_layers(); }

// Every dtype, op and list of counts, the scale pairs and in-place modes
// taken in turn (all of them over the lists), so that the run stays short
// under ranks that outnumber the cores.
void every_type_op_and_scale(Communicator& comm, int local_size) {
  int turn = 0;
  for (DataType t : kAllTypes)
    for (ReduceOp op : kAllOps) {
      const auto pairs = scale_pairs(t, op);
      for (const auto& counts : count_lists(local_size)) {
        const auto [pre, post] = pairs[turn % pairs.size()];
        compare_allreduce(comm, t, op, counts, turn % 3, pre, post, true);
        ++turn;
      }
    }
}

TEST(HierarchicalAllreduce, BitIdenticalToTheRingOnExactValues) {
  if (!world_has_allreduce_layers()) GTEST_SKIP() << "the world's hosts are not layered evenly";
  every_type_op_and_scale(world(), world().world().local_size);
}

// Sums that round: floating sums and averages within the reference's
// tolerance, both ways; min, max and every integer op still bit-identical.
TEST(HierarchicalAllreduce, RoundingSumsStayCloseAndTheRestIdentical) {
  if (!world_has_allreduce_layers()) GTEST_SKIP() << "the world's hosts are not layered evenly";
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      for (const auto& counts : {std::vector<size_t>{100003}, std::vector<size_t>{5, 0, 777, 64}}) {
        compare_allreduce(world(), t, op, counts, 0, 1.0, 1.0, false);
        compare_allreduce(world(), t, op, counts, 2, 0.5, 3.0, false);
      }
    }
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      // Non-exact values, compared bit for bit: min and max do not round.
      Tensors a = make_tensors(t, op, world().rank(), {100003}, 0, false);
      Tensors b = make_tensors(t, op, world().rank(), {100003}, 0, false);
      std::vector<size_t> sa, sb;
      core::collectives::ring_allreduce_segments(world(), segments_of(a, sa, t), op, 1.0, 1.5);
      core::collectives::hierarchical_allreduce(world(), segments_of(b, sb, t), op, 1.0, 1.5);
      EXPECT_EQ(std::memcmp(a.out[0].data, b.out[0].data, 100003 * dtype_size(t)), 0)
          << to_string(t) << "/" << to_string(op);
    }
  }
}

// Larger than a fusion piece and a window round, with tensors straddling the
// pieces; then with pieces, rounds and slices far smaller than a tensor.
TEST(HierarchicalAllreduce, LargeAndManyPieces) {
  if (!world_has_allreduce_layers()) GTEST_SKIP() << "the world's hosts are not layered evenly";
  std::vector<size_t> counts;
  for (size_t i = 0; i < 12; ++i) counts.push_back(i % 9 == 4 ? 0 : 65536 + i * 331);
  core::collectives::Tuning& tune = world().workspace().tuning;
  const core::collectives::Tuning saved = tune;
  compare_allreduce(world(), DataType::kFloat32, ReduceOp::kSum, counts, 0, 1.0, 1.0, true);
  compare_allreduce(world(), DataType::kInt32, ReduceOp::kAvg, counts, 2, 2.0, 0.5, true);
  compare_allreduce(world(), DataType::kFloat32, ReduceOp::kAvg, {(size_t{5} << 20) + 3}, 1, 1.0,
                    1.0, true);
  tune.fusion_piece_bytes = 40 << 10;
  compare_allreduce(world(), DataType::kBFloat16, ReduceOp::kMax, counts, 1, 2.0, 0.5, true);
  compare_allreduce(world(), DataType::kInt8, ReduceOp::kProd, counts, 0, -1.0, 2.0, true);
  tune = saved;
}

// The phases reported: per call for one tensor, per piece between the fusion
// buffer's copies for several, PRESCALE before a prescaled lone tensor.
TEST(HierarchicalAllreduce, ReportsItsPhases) {
  if (!world_has_allreduce_layers()) GTEST_SKIP() << "the world's hosts are not layered evenly";
  PhaseRecorder rec;
  const std::vector<std::string> layers = {"LOCAL_REDUCESCATTER", "CROSS_ALLREDUCE",
                                           "LOCAL_ALLGATHER"};
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
  const std::vector<kernels::cpu::ConstSegment> in = {{a.data(), 1000}, {b.data(), 1000}};
  const std::vector<kernels::cpu::Segment> out = {{a.data(), 1000}, {b.data(), 1000}};
  std::vector<size_t> start = {0, 1000, 2000};
  world().workspace().phases = &rec;
  core::collectives::hierarchical_allreduce(
      world(), {{in.data(), 1}, {out.data(), 1}, start.data(), 1000, DataType::kFloat32, 4},
      ReduceOp::kSum, 1.0, 1.0);
  EXPECT_EQ(rec.seen, layers);
  rec.seen.clear();
  core::collectives::hierarchical_allreduce(
      world(), {{in.data(), 1}, {out.data(), 1}, start.data(), 1000, DataType::kFloat32, 4},
      ReduceOp::kSum, 2.0, 1.0);
  std::vector<std::string> prescaled = {"PRESCALE"};
  prescaled.insert(prescaled.end(), layers.begin(), layers.end());
  EXPECT_EQ(rec.seen, prescaled);
  rec.seen.clear();
  core::collectives::hierarchical_allreduce(
      world(), {in, out, start.data(), 2000, DataType::kFloat32, 4}, ReduceOp::kSum, 1.0, 1.0);
  std::vector<std::string> fused = {"MEMCPY_IN_FUSION_BUFFER"};
  fused.insert(fused.end(), layers.begin(), layers.end());
  fused.push_back("MEMCPY_OUT_FUSION_BUFFER");
  EXPECT_EQ(rec.seen, fused);
  world().workspace().phases = nullptr;
  EXPECT_EQ(rec.open, 0);
}

// Hosts of different sizes: the allreduce stays flat (with an info line), and
// the hierarchical algorithm refuses such a placement rather than guess.
TEST(HierarchicalAllreduce, UnevenHostsRunFlat) {
  const Layout l = layout_of(all_ranks());
  if (!l.allgather_layers() || l.even()) GTEST_SKIP() << "the world's hosts are not uneven";
  // Switched on, the flat algorithm runs and an info line says why, once.
  if (switch_of("HOROVOD_HIERARCHICAL_ALLREDUCE") == "1") {
    world().workspace().flat_despite_switch = 0;
    std::string ranks_per_host;
    for (const auto& h : l.hosts) {
      ranks_per_host += (ranks_per_host.empty() ? "" : ", ") + std::to_string(h.size());
    }
    const std::string said = logged_while(common::LogLevel::kInfo, [] {
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(core::collectives::choose_algorithm(world(), Collective::kAllreduce, 64 << 20),
                  Algorithm::kRing);
      }
    });
    const std::string line = "info: HOROVOD_HIERARCHICAL_ALLREDUCE=1: the hosts hold different "
                             "numbers of ranks (ranks per host: " + ranks_per_host +
                             "), so the allreduce runs flat";
    EXPECT_NE(said.find(line), std::string::npos) << said;
    EXPECT_EQ(said.find(line), said.rfind(line)) << "said more than once: " << said;
  }
  EXPECT_EQ(core::collectives::choose_algorithm(world(), Collective::kAllreduce, 64 << 20),
            Algorithm::kRing);
  std::vector<float> v(10, 1.0f);
  const kernels::cpu::ConstSegment in{v.data(), 10};
  const kernels::cpu::Segment out{v.data(), 10};
  const size_t start[2] = {0, 10};
  try {
    core::collectives::hierarchical_allreduce(world(), {{&in, 1}, {&out, 1}, start, 10,
                                                        DataType::kFloat32, 4},
                                              ReduceOp::kSum, 1.0, 1.0);
    ADD_FAILURE() << "the hierarchical allreduce ran on uneven hosts";
  } catch (const common::Failure& e) {
    EXPECT_NE(std::string(e.what()).find("needs as many ranks on every host"), std::string::npos)
        << e.what();
  }
  // Through the entry point, whatever the switch says: right.
  for (ReduceOp op : kAllOps) {
    Buffer b(DataType::kInt32, 1001);
    for (size_t i = 0; i < 1001; ++i) b.set(i, value(DataType::kInt32, op, world().rank(), i));
    core::allreduce(world(), b.data(), b.data(), 1001, DataType::kInt32, op);
    for (size_t i = 0; i < 1001; ++i) {
      ASSERT_EQ(b[i], expected(DataType::kInt32, op, world().size(), i)) << to_string(op);
    }
  }
}

// ---------------------------------------------------------------------------
// Allgather: the hierarchical algorithm against the flat ring.

// Per-rank counts: even, uneven, some ranks give nothing, one gives all.
std::vector<size_t> pattern(int n, int which, size_t k) {
  std::vector<size_t> c(n);
  for (int r = 0; r < n; ++r) {
    switch (which) {
      case 0: c[r] = k; break;
      case 1: c[r] = (r + 1) * k + r; break;
      case 2: c[r] = r % 2 == 0 ? 0 : k + r; break;
      default: c[r] = r == n - 1 ? k : 0; break;
    }
  }
  return c;
}

void compare_allgather(Communicator& comm, DataType t, const std::vector<size_t>& counts,
                       bool in_place) {
  const int n = comm.size(), me = comm.rank();
  std::vector<size_t> off(n + 1, 0);
  for (int r = 0; r < n; ++r) off[r + 1] = off[r] + counts[r];
  if (off[n] == 0) return;
  Buffer flat(t, off[n]), layered(t, off[n]), send(t, counts[me]);
  for (size_t i = 0; i < off[n]; ++i) {
    flat.set(i, 3);
    layered.set(i, 3);
  }
  const Periodic mine = values_of(t, ReduceOp::kSum, me);
  for (size_t j = 0; j < counts[me]; ++j) send.set(j, mine(j));
  const void* send_layered = send.data();
  if (in_place) {
    for (size_t j = 0; j < counts[me]; ++j) layered.set(off[me] + j, mine(j));
    send_layered = layered.at(off[me]);
  }
  core::collectives::ring_allgather(comm, send.data(), flat.data(), counts, t);
  core::collectives::hierarchical_allgather(comm, send_layered, layered.data(), counts, t);
  const std::string label = std::string(to_string(t)) + " total " + std::to_string(off[n]) +
                            (in_place ? " in place" : "");
  ASSERT_EQ(std::memcmp(flat.data(), layered.data(), off[n] * dtype_size(t)), 0) << label;
  size_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    const Periodic theirs = values_of(t, ReduceOp::kSum, r);
    for (size_t j = 0; j < counts[r]; ++j) wrong += layered[off[r] + j] != theirs(j);
  }
  EXPECT_EQ(wrong, 0u) << label;
  EXPECT_TRUE(layered.guard_intact()) << label;
}

void allgather_patterns(Communicator& comm) {
  for (int p = 0; p < 4; ++p)
    for (size_t k : {size_t{1}, size_t{7}, size_t{1000}})
      for (DataType t : kAllTypes)
        for (bool in_place : {false, true}) compare_allgather(comm, t, pattern(comm.size(), p, k), in_place);
  compare_allgather(comm, DataType::kFloat32, pattern(comm.size(), 1, 300007), false);
  compare_allgather(comm, DataType::kInt8, pattern(comm.size(), 2, 1000003), true);
}

TEST(HierarchicalAllgather, BitIdenticalToTheRing) {
  if (!layout_of(all_ranks()).allgather_layers()) GTEST_SKIP() << "the world has no layered hosts";
  allgather_patterns(world());
}

// ---------------------------------------------------------------------------
// Groups and the choice of algorithm.

// The groups follow the hosts: this communicator's ranks on this host, and
// the ranks at this rank's index on every host that has one.
void expect_groups(Group& g) {
  if (g.comm == nullptr) return;
  const Layout& l = g.layout;
  const int me = g.comm->rank();
  const int h = l.host_of(me);
  const auto& mine = l.hosts[h];
  const int index = int(std::find(mine.begin(), mine.end(), me) - mine.begin());
  std::vector<int> host_want, cross_want;
  for (int i : mine) host_want.push_back(g.members[i]);
  for (const auto& ranks : l.hosts) {
    if (int(ranks.size()) > index) cross_want.push_back(g.members[ranks[index]]);
  }
  std::sort(cross_want.begin(), cross_want.end());
  const Communicator::HostGroups groups = g.comm->host_groups();
  auto members_of = [](Communicator& c) {
    std::vector<int> m;
    for (int r = 0; r < c.size(); ++r) m.push_back(c.global_rank(r));
    return m;
  };
  EXPECT_EQ(members_of(*groups.host), host_want);
  EXPECT_EQ(members_of(*groups.cross), cross_want);
  EXPECT_EQ(groups.host->rank(), index);
  const char* transport = std::getenv("RINGLET_TRANSPORT");
  const bool shm = transport == nullptr || std::string(transport) != "tcp";
  EXPECT_EQ(groups.host->window() != nullptr, shm && host_want.size() > 1);
  EXPECT_EQ(groups.cross->window(), nullptr);
  // Built once.
  EXPECT_EQ(g.comm->host_groups().host, groups.host);
}

// The algorithm each switch gives on this placement, as the rule says.
void expect_choices(Group& g) {
  if (g.comm == nullptr) return;
  const std::string ar = switch_of("HOROVOD_HIERARCHICAL_ALLREDUCE");
  const std::string ag = switch_of("HOROVOD_HIERARCHICAL_ALLGATHER");
  for (size_t bytes : {size_t{4}, size_t{64} << 20}) {
    const bool big = bytes >= g.comm->workspace().tuning.hierarchical_min_bytes;
    const bool ar_on = g.layout.allreduce_layers() && (ar == "1" || (ar == "unset" && big));
    const bool ag_on = g.layout.allgather_layers() && (ag == "1" || (ag == "unset" && big));
    EXPECT_EQ(core::collectives::choose_algorithm(*g.comm, Collective::kAllreduce, bytes) ==
                  Algorithm::kHierarchical,
              ar_on)
        << "allreduce of " << bytes << " bytes, HOROVOD_HIERARCHICAL_ALLREDUCE " << ar;
    EXPECT_EQ(core::collectives::choose_algorithm(*g.comm, Collective::kAllgather, bytes) ==
                  Algorithm::kHierarchical,
              ag_on)
        << "allgather of " << bytes << " bytes, HOROVOD_HIERARCHICAL_ALLGATHER " << ag;
    // The other collectives never run hierarchically.
    EXPECT_NE(core::collectives::choose_algorithm(*g.comm, Collective::kBroadcast, bytes),
              Algorithm::kHierarchical);
  }
}

TEST(HierarchicalGroups, FollowTheHosts) {
  Group g{&world(), all_ranks(), layout_of(all_ranks())};
  expect_groups(g);
}

TEST(HierarchicalChoice, FollowsTheSwitchesAndThePlacement) {
  Group g{&world(), all_ranks(), layout_of(all_ranks())};
  expect_choices(g);
}

// ---------------------------------------------------------------------------
// Process sets across the hosts: an even one, one rank per host, and an
// uneven one, each a communicator of its own with its own groups.

std::vector<Group>& process_sets() {
  static std::vector<Group> sets = [] {
    const Layout w = layout_of(all_ranks());
    size_t smallest = world().size();
    for (const auto& h : w.hosts) smallest = std::min(smallest, h.size());
    std::vector<std::vector<int>> lists;
    if (w.hosts.size() > 1 && smallest >= 2) {  // the first two of every host
      std::vector<int> even;
      for (const auto& h : w.hosts) even.insert(even.end(), h.begin(), h.begin() + 2);
      lists.push_back(even);
    }
    if (w.hosts.size() > 1) {  // the first of every host
      std::vector<int> firsts;
      for (const auto& h : w.hosts) firsts.push_back(h.front());
      lists.push_back(firsts);
    }
    if (w.hosts.size() > 1 && w.hosts.front().size() >= 2) {  // all of one host, one of another
      std::vector<int> uneven = w.hosts.front();
      uneven.push_back(w.hosts[1].front());
      lists.push_back(uneven);
      lists.push_back(w.hosts.front());  // all of one host: a window of its own
    }
    std::vector<Group> out;
    for (size_t k = 0; k < lists.size(); ++k) {
      std::vector<int> members = lists[k];
      std::sort(members.begin(), members.end());
      Group g{nullptr, members, layout_of(members)};
      if (std::binary_search(members.begin(), members.end(), world().rank())) {
        g_sets.push_back(
            Communicator::create_subset(world(), members, "hierarchical_test." + std::to_string(k)));
        g.comm = g_sets.back().get();
      }
      out.push_back(g);
    }
    return out;
  }();
  return sets;
}

TEST(HierarchicalProcessSets, GroupsChoicesAndResults) {
  if (process_sets().empty()) GTEST_SKIP() << "the world spans one host";
  for (Group& g : process_sets()) {
    SCOPED_TRACE("process set of " + std::to_string(g.members.size()) + " ranks on " +
                 std::to_string(g.layout.hosts.size()) + " hosts");
    if (g.comm == nullptr) continue;  // collective over the members only
    // A window wherever the set's ranks share one host, in a job of several.
    const char* transport = std::getenv("RINGLET_TRANSPORT");
    const bool shm = transport == nullptr || std::string(transport) != "tcp";
    EXPECT_EQ(g.comm->window() != nullptr,
              shm && g.layout.hosts.size() == 1 && g.members.size() > 1);
    expect_groups(g);
    expect_choices(g);
    if (!g.layout.shared() && switch_of("HOROVOD_HIERARCHICAL_ALLGATHER") == "1") {
      // One rank per host: the flat algorithm is the hierarchical one, said
      // at debug level only.
      g.comm->workspace().flat_despite_switch = 0;
      const auto choose = [&] {
        EXPECT_EQ(core::collectives::choose_algorithm(*g.comm, Collective::kAllgather, 4),
                  Algorithm::kRing);
      };
      EXPECT_EQ(logged_while(common::LogLevel::kInfo, choose), "");
      g.comm->workspace().flat_despite_switch = 0;
      EXPECT_NE(logged_while(common::LogLevel::kDebug, choose)
                    .find("debug: HOROVOD_HIERARCHICAL_ALLGATHER=1: each host holds one rank"),
                std::string::npos);
    }
    if (g.layout.allreduce_layers()) {
      for (DataType t : {DataType::kFloat32, DataType::kInt8, DataType::kFloat16})
        for (ReduceOp op : kAllOps)
          for (const auto& counts : count_lists(int(g.layout.hosts.front().size()))) {
            const auto [pre, post] = scale_pairs(t, op).back();
            compare_allreduce(*g.comm, t, op, counts, 2, pre, post, true);
          }
    }
    if (g.layout.allgather_layers()) {
      for (int p = 0; p < 4; ++p)
        for (DataType t : {DataType::kFloat64, DataType::kUInt8})
          compare_allgather(*g.comm, t, pattern(g.comm->size(), p, 333), p % 2 == 0);
    }
    // Through the entry points, with the table's choice: right results.
    for (ReduceOp op : kAllOps) {
      Buffer b(DataType::kInt16, 300001);
      for (size_t i = 0; i < 300001; ++i) b.set(i, value(DataType::kInt16, op, g.comm->rank(), i));
      core::allreduce(*g.comm, b.data(), b.data(), 300001, DataType::kInt16, op);
      const Periodic want = expected_of(DataType::kInt16, op, g.comm->size());
      size_t wrong = 0;
      for (size_t i = 0; i < 300001; ++i) wrong += b[i] != want(i);
      EXPECT_EQ(wrong, 0u) << to_string(op);
    }
    core::barrier(*g.comm);
  }
}


}  // namespace
}  // namespace ringlet::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<ringlet::core::Communicator> comm;
  try {
    comm = ringlet::core::Communicator::create(ringlet::core::load_config(),
                                                ringlet::core::detect_launch());
  } catch (const std::exception& e) {
    std::cerr << "hierarchical_test: could not create the communicator: " << e.what()
              << std::endl;
    return 2;
  }
  ringlet::test::g_world = comm.get();
  ringlet::test::report_on_rank_zero(comm->rank());
  int rc = 0;
  try {
    rc = RUN_ALL_TESTS();
    ringlet::core::barrier(*comm);
    ringlet::test::g_sets.clear();
    ringlet::test::leave_together(*comm, "hierarchical_test");
  } catch (const std::exception& e) {
    std::cerr << "hierarchical_test: " << e.what() << std::endl;
    rc = 3;
  }
  return rc;
}
