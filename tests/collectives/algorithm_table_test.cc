// The algorithm table's choices, one case per row: placement facts, the forced
// algorithm (RINGLET_ALGORITHM), the message size, and the algorithm or the
// exact error expected. No communicator: select() is a pure function. A second
// test walks every combination of facts, forcing and sizes around the limits
// and compares with the rules the table replaced, written out as they were.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/collectives/algorithm_table.h"
#include "core/collectives/algorithms.h"
#include "core/config.h"

namespace ringlet::core::collectives {
namespace {

constexpr size_t KiB = 1024;

struct Case {
  const char* what;
  Collective collective;
  PlacementFacts facts;
  AlgorithmChoice forced;
  size_t bytes;
  std::optional<Algorithm> expected;  // nullopt: ConfigError `error`
  const char* error = "";
};

constexpr PlacementFacts kWindow{.hosts = 1, .window = true, .oversubscribed = false};
constexpr PlacementFacts kWindowOversubscribed{.hosts = 1, .window = true, .oversubscribed = true};
constexpr PlacementFacts kTcpOneHost{.hosts = 1, .window = false, .oversubscribed = false};
constexpr PlacementFacts kTwoHosts{.hosts = 2, .window = false, .oversubscribed = false};
constexpr PlacementFacts kThreeHostsOversubscribed{
    .hosts = 3, .window = false, .oversubscribed = true};

using enum Collective;
using A = Algorithm;
using F = AlgorithmChoice;

const char* const kDirectTwoHosts =
    "RINGLET_ALGORITHM=direct needs every rank on one host with a shared-memory window, but the "
    "job spans 2 hosts (accepted here: auto|ring)";
const char* const kOneStepTwoHosts =
    "RINGLET_ALGORITHM=onestep needs every rank on one host with a shared-memory window, but the "
    "job spans 2 hosts (accepted here: auto|ring)";
const char* const kDirectTcp =
    "RINGLET_ALGORITHM=direct needs every rank on one host with a shared-memory window, but "
    "shared memory is off (RINGLET_TRANSPORT=tcp) (accepted here: auto|ring)";
const char* const kOneStepTcp =
    "RINGLET_ALGORITHM=onestep needs every rank on one host with a shared-memory window, but "
    "shared memory is off (RINGLET_TRANSPORT=tcp) (accepted here: auto|ring)";

const Case kCases[] = {
    // auto, one host with a window: one-step allreduce up to 8 KiB, direct above.
    {"small allreduce", kAllreduce, kWindow, F::kAuto, 0, A::kOneStep},
    {"4 KiB allreduce", kAllreduce, kWindow, F::kAuto, 4 * KiB, A::kOneStep},
    {"8 KiB allreduce", kAllreduce, kWindow, F::kAuto, 8 * KiB, A::kOneStep},
    {"8 KiB + 1 allreduce", kAllreduce, kWindow, F::kAuto, 8 * KiB + 1, A::kDirect},
    {"64 KiB allreduce", kAllreduce, kWindow, F::kAuto, 64 * KiB, A::kDirect},
    {"1 GiB allreduce", kAllreduce, kWindow, F::kAuto, size_t{1} << 30, A::kDirect},
    // auto, ranks outnumber cores: one-step through 128 KiB.
    {"oversubscribed 64 KiB", kAllreduce, kWindowOversubscribed, F::kAuto, 64 * KiB, A::kOneStep},
    {"oversubscribed 128 KiB", kAllreduce, kWindowOversubscribed, F::kAuto, 128 * KiB,
     A::kOneStep},
    {"oversubscribed 128 KiB + 1", kAllreduce, kWindowOversubscribed, F::kAuto, 128 * KiB + 1,
     A::kDirect},
    // auto, the other collectives on a window: direct at any size.
    {"small allgather", kAllgather, kWindow, F::kAuto, 4, A::kDirect},
    {"large allgather", kAllgather, kWindow, F::kAuto, size_t{1} << 30, A::kDirect},
    {"broadcast", kBroadcast, kWindow, F::kAuto, 4 * KiB, A::kDirect},
    {"reducescatter", kReducescatter, kWindowOversubscribed, F::kAuto, 4 * KiB, A::kDirect},
    {"alltoall", kAlltoall, kWindow, F::kAuto, 0, A::kDirect},
    {"barrier", kBarrier, kWindow, F::kAuto, 0, A::kDirect},
    // auto without a window (several hosts, or tcp): the ring.
    {"two hosts allreduce", kAllreduce, kTwoHosts, F::kAuto, 4 * KiB, A::kRing},
    {"two hosts allreduce large", kAllreduce, kTwoHosts, F::kAuto, size_t{1} << 30, A::kRing},
    {"tcp allreduce", kAllreduce, kTcpOneHost, F::kAuto, 0, A::kRing},
    {"three hosts oversubscribed", kAllreduce, kThreeHostsOversubscribed, F::kAuto, 4, A::kRing},
    {"two hosts allgather", kAllgather, kTwoHosts, F::kAuto, 4 * KiB, A::kRing},
    {"tcp broadcast", kBroadcast, kTcpOneHost, F::kAuto, 4 * KiB, A::kRing},
    {"two hosts reducescatter", kReducescatter, kTwoHosts, F::kAuto, 4 * KiB, A::kRing},
    {"tcp alltoall", kAlltoall, kTcpOneHost, F::kAuto, 0, A::kRing},
    {"two hosts barrier", kBarrier, kTwoHosts, F::kAuto, 0, A::kRing},
    // RINGLET_ALGORITHM=ring: anywhere, at any size.
    {"ring forced on a window", kAllreduce, kWindow, F::kRing, 4, A::kRing},
    {"ring forced, oversubscribed", kAllreduce, kWindowOversubscribed, F::kRing, 4, A::kRing},
    {"ring forced, barrier", kBarrier, kWindow, F::kRing, 0, A::kRing},
    {"ring forced, two hosts", kAlltoall, kTwoHosts, F::kRing, 0, A::kRing},
    {"ring forced, tcp", kBroadcast, kTcpOneHost, F::kRing, 4, A::kRing},
    // RINGLET_ALGORITHM=direct: on a window at any size, refused without one.
    {"direct forced, small allreduce", kAllreduce, kWindow, F::kDirect, 4, A::kDirect},
    {"direct forced, oversubscribed", kAllreduce, kWindowOversubscribed, F::kDirect, 4,
     A::kDirect},
    {"direct forced, alltoall", kAlltoall, kWindow, F::kDirect, 0, A::kDirect},
    {"direct forced, two hosts", kAllreduce, kTwoHosts, F::kDirect, 4, std::nullopt,
     kDirectTwoHosts},
    {"direct forced, two hosts barrier", kBarrier, kTwoHosts, F::kDirect, 0, std::nullopt,
     kDirectTwoHosts},
    {"direct forced, tcp", kAllgather, kTcpOneHost, F::kDirect, 4, std::nullopt, kDirectTcp},
    // RINGLET_ALGORITHM=onestep: allreduce at any size; the others run direct.
    {"onestep forced, large allreduce", kAllreduce, kWindow, F::kOneStep, size_t{1} << 30,
     A::kOneStep},
    {"onestep forced, oversubscribed", kAllreduce, kWindowOversubscribed, F::kOneStep, 1 << 20,
     A::kOneStep},
    {"onestep forced, allgather", kAllgather, kWindow, F::kOneStep, 4, A::kDirect},
    {"onestep forced, broadcast", kBroadcast, kWindow, F::kOneStep, 4, A::kDirect},
    {"onestep forced, reducescatter", kReducescatter, kWindow, F::kOneStep, 4, A::kDirect},
    {"onestep forced, alltoall", kAlltoall, kWindow, F::kOneStep, 0, A::kDirect},
    {"onestep forced, barrier", kBarrier, kWindow, F::kOneStep, 0, A::kDirect},
    {"onestep forced, two hosts", kAllreduce, kTwoHosts, F::kOneStep, 4, std::nullopt,
     kOneStepTwoHosts},
    {"onestep forced, two hosts allgather", kAllgather, kTwoHosts, F::kOneStep, 4, std::nullopt,
     kOneStepTwoHosts},
    {"onestep forced, tcp", kAllreduce, kTcpOneHost, F::kOneStep, 4, std::nullopt, kOneStepTcp},
    {"onestep forced, tcp barrier", kBarrier, kTcpOneHost, F::kOneStep, 0, std::nullopt,
     kOneStepTcp},
    {"onestep forced, three hosts", kAllreduce, kThreeHostsOversubscribed, F::kOneStep, 4,
     std::nullopt,
     "RINGLET_ALGORITHM=onestep needs every rank on one host with a shared-memory window, but "
     "the job spans 3 hosts (accepted here: auto|ring)"},
};

TEST(AlgorithmTable, ChoosesAsEachCaseSays) {
  const auto rows = default_rows(Tuning{});
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.what);
    if (c.expected) {
      EXPECT_EQ(select(rows, c.facts, forced_algorithm(c.forced), c.collective, c.bytes),
                *c.expected);
      continue;
    }
    try {
      select(rows, c.facts, forced_algorithm(c.forced), c.collective, c.bytes);
      ADD_FAILURE() << "expected ConfigError: " << c.error;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), c.error);
    }
  }
}

// Device memory on the CUDA IPC window: the kernels that wait on each other
// where the ranks' kernels run at once, the host-flag algorithms where they
// take turns; RINGLET_ALGORITHM forces any of the four either way.
TEST(AlgorithmTable, DeviceRowsFollowWhetherTheKernelsRunAtOnce) {
  const auto rows = device_rows(Tuning{});
  constexpr PlacementFacts kAtOnce{.hosts = 1, .window = true, .concurrent_kernels = true};
  constexpr PlacementFacts kInTurns{.hosts = 1, .window = true, .concurrent_kernels = false};
  const size_t limit = Tuning{}.device_onestep_max_bytes;
  EXPECT_EQ(limit, size_t{256} << 10);
  EXPECT_EQ(select(rows, kAtOnce, std::nullopt, kAllreduce, 1024), A::kOneStep);
  EXPECT_EQ(select(rows, kAtOnce, std::nullopt, kAllreduce, limit), A::kOneStep);
  EXPECT_EQ(select(rows, kAtOnce, std::nullopt, kAllreduce, limit + 1), A::kTwoShot);
  EXPECT_EQ(select(rows, kAtOnce, std::nullopt, kAllreduce, size_t{256} << 20), A::kTwoShot);
  EXPECT_EQ(select(rows, kInTurns, std::nullopt, kAllreduce, 1024), A::kDirect);
  EXPECT_EQ(select(rows, kInTurns, std::nullopt, kAllreduce, size_t{256} << 20), A::kDirect);
  for (const PlacementFacts& f : {kAtOnce, kInTurns}) {
    for (const A a : {A::kOneStep, A::kTwoShot, A::kDirect, A::kRing}) {
      EXPECT_EQ(select(rows, f, a, kAllreduce, 1024), a) << to_string(a);
      EXPECT_EQ(select(rows, f, a, kAllreduce, size_t{1} << 30), a) << to_string(a);
    }
  }
  Tuning t;
  t.device_onestep_max_bytes = 0;
  EXPECT_EQ(select(device_rows(t), kAtOnce, std::nullopt, kAllreduce, 1), A::kTwoShot);
  EXPECT_EQ(describe_choice(rows, kAtOnce, std::nullopt, kAllreduce, Switch::kUnset),
            "allreduce: onestep up to 256 KiB, twoshot above 256 KiB");
  EXPECT_EQ(describe_choice(rows, kInTurns, std::nullopt, kAllreduce, Switch::kUnset),
            "allreduce: direct");
}

// On host memory, twoshot runs the host's two-step allreduce (direct) where
// the window allows it, as onestep does on the collectives that lack it.
TEST(AlgorithmTable, TwoShotOnHostMemoryRunsDirect) {
  const auto rows = default_rows(Tuning{});
  EXPECT_EQ(select(rows, kWindow, A::kTwoShot, kAllreduce, 1 << 20), A::kDirect);
  EXPECT_EQ(select(rows, kWindow, A::kTwoShot, kAllgather, 1 << 20), A::kDirect);
}

TEST(AlgorithmTable, OneStepLimitsFollowTheTuning) {
  Tuning t;
  t.onestep_max_bytes = 0;
  t.onestep_max_oversubscribed_bytes = 1 << 20;
  const auto rows = default_rows(t);
  EXPECT_EQ(select(rows, kWindow, std::nullopt, kAllreduce, 0), A::kOneStep);
  EXPECT_EQ(select(rows, kWindow, std::nullopt, kAllreduce, 1), A::kDirect);
  EXPECT_EQ(select(rows, kWindowOversubscribed, std::nullopt, kAllreduce, 1 << 20), A::kOneStep);
  EXPECT_EQ(select(rows, kWindowOversubscribed, std::nullopt, kAllreduce, (1 << 20) + 1),
            A::kDirect);
}

// The rules that the table replaced, as they were written against a live
// communicator, with its facts passed in.
Algorithm previous_rules(const PlacementFacts& f, AlgorithmChoice forced, const Tuning& t,
                         Collective c, size_t bytes) {
  if (forced == AlgorithmChoice::kRing) return Algorithm::kRing;
  if (!f.window) {
    if (forced == AlgorithmChoice::kAuto) return Algorithm::kRing;
    const char* name = forced == AlgorithmChoice::kDirect ? "direct" : "onestep";
    std::string why = !f.one_host() ? "the job spans " + std::to_string(f.hosts) + " hosts"
                                    : "shared memory is off (RINGLET_TRANSPORT=tcp)";
    throw ConfigError(std::string("RINGLET_ALGORITHM=") + name +
                      " needs every rank on one host with a shared-memory window, but " + why +
                      " (accepted here: auto|ring)");
  }
  switch (forced) {
    case AlgorithmChoice::kDirect:
      return Algorithm::kDirect;
    case AlgorithmChoice::kOneStep:
      return c == Collective::kAllreduce ? Algorithm::kOneStep : Algorithm::kDirect;
    default:
      break;
  }
  const size_t onestep_max =
      f.oversubscribed ? t.onestep_max_oversubscribed_bytes : t.onestep_max_bytes;
  if (c == Collective::kAllreduce && bytes <= onestep_max) return Algorithm::kOneStep;
  return Algorithm::kDirect;
}

// Either the algorithm or the error's text, so that both compare alike.
std::string outcome(auto&& choose) {
  try {
    return std::string(to_string(choose()));
  } catch (const ConfigError& e) {
    return std::string("error: ") + e.what();
  }
}

TEST(AlgorithmTable, AgreesWithThePreviousRulesEverywhere) {
  std::vector<Tuning> tunings(3);
  tunings[1].onestep_max_bytes = 0;
  tunings[1].onestep_max_oversubscribed_bytes = 0;
  tunings[2].onestep_max_bytes = 1 << 20;
  tunings[2].onestep_max_oversubscribed_bytes = 4 * KiB;
  int compared = 0;
  for (const Tuning& t : tunings) {
    const auto rows = default_rows(t);
    std::vector<size_t> sizes = {0, 1, 4 * KiB, size_t{1} << 30, kAnyBytes};
    for (size_t limit : {t.onestep_max_bytes, t.onestep_max_oversubscribed_bytes}) {
      sizes.push_back(limit);
      sizes.push_back(limit + 1);
      if (limit > 0) sizes.push_back(limit - 1);
    }
    for (Collective c : {kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall, kBarrier}) {
      for (int hosts : {1, 2, 5}) {
        for (bool window : {false, true}) {
          for (bool oversubscribed : {false, true}) {
            const PlacementFacts f{hosts, window, oversubscribed};
            for (F forced : {F::kAuto, F::kRing, F::kDirect, F::kOneStep}) {
              for (size_t bytes : sizes) {
                SCOPED_TRACE(std::string(to_string(c)) + " hosts=" + std::to_string(hosts) +
                             " window=" + std::to_string(window) +
                             " oversubscribed=" + std::to_string(oversubscribed) +
                             " forced=" + std::to_string(static_cast<int>(forced)) +
                             " bytes=" + std::to_string(bytes));
                EXPECT_EQ(outcome([&] {
                            return select(rows, f, forced_algorithm(forced), c, bytes);
                          }),
                          outcome([&] { return previous_rules(f, forced, t, c, bytes); }));
                ++compared;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 3000);
}

// HOROVOD_CPU_OPERATIONS=MPI: MPI's collective for every host collective,
// on any placement and at any size, whatever RINGLET_ALGORITHM says (it then
// concerns device tensors only).
TEST(AlgorithmTable, MpiOperationsTakeEveryHostCollective) {
  const auto rows = default_rows(Tuning{});
  for (PlacementFacts f : {kWindow, kWindowOversubscribed, kTcpOneHost, kTwoHosts,
                           kThreeHostsOversubscribed}) {
    f.mpi = true;
    for (Collective c : {kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall, kBarrier})
      for (F forced : {F::kAuto, F::kRing, F::kDirect, F::kOneStep})
        for (size_t bytes : {size_t{0}, size_t{4}, 8 * KiB, size_t{1} << 30, kAnyBytes}) {
          SCOPED_TRACE(std::string(to_string(c)) + " hosts=" + std::to_string(f.hosts) +
                       " window=" + std::to_string(f.window) +
                       " forced=" + std::to_string(static_cast<int>(forced)) +
                       " bytes=" + std::to_string(bytes));
          EXPECT_EQ(select(rows, f, forced_algorithm(forced), c, bytes), A::kMpi);
        }
  }
  EXPECT_EQ(to_string(A::kMpi), "mpi");
  // The line the log gives at info level says so, forced or not.
  PlacementFacts f = kWindow;
  f.mpi = true;
  for (F forced : {F::kAuto, F::kRing}) {
    EXPECT_EQ(describe_choice(rows, f, forced_algorithm(forced), kAllreduce, Switch::kUnset),
              "allreduce: mpi");
  }
  EXPECT_EQ(describe_choice(rows, f, std::nullopt, kAllgather, Switch::kOff),
            "allgather: mpi (HOROVOD_HIERARCHICAL_ALLGATHER=0)");
}

TEST(AlgorithmTable, EveryRowHasAnImplementation) {
  for (const Row& r : default_rows(Tuning{})) {
    EXPECT_TRUE(implemented(r.collective, r.algorithm))
        << to_string(r.collective) << " has no " << to_string(r.algorithm) << " in its dispatch "
        << "table";
  }
}

// The hierarchical rows: facts of hosts in layers, the switch
// (HOROVOD_HIERARCHICAL_ALLREDUCE / _ALLGATHER) and the size.
constexpr PlacementFacts kTwoHostsOfTwo{.hosts = 2, .window = false, .oversubscribed = true,
                                        .shared_hosts = true, .even_hosts = true};
constexpr PlacementFacts kTwoUnevenHosts{.hosts = 2, .window = false, .oversubscribed = true,
                                         .shared_hosts = true, .even_hosts = false};
constexpr PlacementFacts kTwoHostsOfOne{.hosts = 2, .window = false, .oversubscribed = false,
                                        .shared_hosts = false, .even_hosts = true};
constexpr PlacementFacts kOneHostOfFour{.hosts = 1, .window = true, .oversubscribed = true,
                                        .shared_hosts = true, .even_hosts = true};

struct SwitchCase {
  const char* what;
  Collective collective;
  PlacementFacts facts;
  Switch hierarchical;
  size_t bytes;
  Algorithm expected;
};

const SwitchCase kSwitchCases[] = {
    // Unset: from 256 KiB up, where hosts hold several ranks.
    {"unset, small allreduce", kAllreduce, kTwoHostsOfTwo, Switch::kUnset, 4 * KiB, A::kRing},
    {"unset, below the limit", kAllreduce, kTwoHostsOfTwo, Switch::kUnset, 256 * KiB - 1,
     A::kRing},
    {"unset, at the limit", kAllreduce, kTwoHostsOfTwo, Switch::kUnset, 256 * KiB,
     A::kHierarchical},
    {"unset, 64 MiB", kAllreduce, kTwoHostsOfTwo, Switch::kUnset, 64 << 20, A::kHierarchical},
    {"unset, allgather at the limit", kAllgather, kTwoHostsOfTwo, Switch::kUnset, 256 * KiB,
     A::kHierarchical},
    {"unset, small allgather", kAllgather, kTwoHostsOfTwo, Switch::kUnset, 100, A::kRing},
    // The allreduce needs even hosts; the allgather does not.
    {"unset, uneven allreduce", kAllreduce, kTwoUnevenHosts, Switch::kUnset, 64 << 20, A::kRing},
    {"unset, uneven allgather", kAllgather, kTwoUnevenHosts, Switch::kUnset, 64 << 20,
     A::kHierarchical},
    // One rank per host, or one host: no hierarchy to use.
    {"unset, one rank per host", kAllreduce, kTwoHostsOfOne, Switch::kUnset, 64 << 20, A::kRing},
    {"unset, one host", kAllreduce, kOneHostOfFour, Switch::kUnset, 64 << 20, A::kDirect},
    // On: at every size where the placement has a hierarchy; flat elsewhere.
    {"on, 4 bytes", kAllreduce, kTwoHostsOfTwo, Switch::kOn, 4, A::kHierarchical},
    {"on, 0 bytes", kAllgather, kTwoHostsOfTwo, Switch::kOn, 0, A::kHierarchical},
    {"on, uneven allreduce", kAllreduce, kTwoUnevenHosts, Switch::kOn, 4, A::kRing},
    {"on, uneven allgather", kAllgather, kTwoUnevenHosts, Switch::kOn, 4, A::kHierarchical},
    {"on, one rank per host", kAllgather, kTwoHostsOfOne, Switch::kOn, 64 << 20, A::kRing},
    {"on, one host, small", kAllreduce, kOneHostOfFour, Switch::kOn, 4, A::kOneStep},
    {"on, one host, large", kAllreduce, kOneHostOfFour, Switch::kOn, 64 << 20, A::kDirect},
    // Off: never.
    {"off, 64 MiB", kAllreduce, kTwoHostsOfTwo, Switch::kOff, 64 << 20, A::kRing},
    {"off, allgather", kAllgather, kTwoUnevenHosts, Switch::kOff, 64 << 20, A::kRing},
    // The other collectives have no hierarchical row.
    {"on, broadcast", kBroadcast, kTwoHostsOfTwo, Switch::kOn, 64 << 20, A::kRing},
    {"unset, reducescatter", kReducescatter, kTwoHostsOfTwo, Switch::kUnset, 64 << 20, A::kRing},
};

TEST(AlgorithmTable, HierarchicalRowsFollowTheSwitch) {
  const auto rows = default_rows(Tuning{});
  for (const SwitchCase& c : kSwitchCases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(select(rows, c.facts, std::nullopt, c.collective, c.bytes, c.hierarchical),
              c.expected);
  }
}

// RINGLET_ALGORITHM forces what it names and never the hierarchical rows,
// which it does not name: what it accepts leaves them out.
TEST(AlgorithmTable, ForcingPassesOverTheHierarchicalRows) {
  const auto rows = default_rows(Tuning{});
  EXPECT_EQ(select(rows, kTwoHostsOfTwo, A::kRing, kAllreduce, 64 << 20), A::kRing);
  EXPECT_EQ(select(rows, kTwoHostsOfTwo, A::kRing, kAllgather, 64 << 20, Switch::kUnset),
            A::kRing);
  try {
    select(rows, kTwoHostsOfTwo, A::kDirect, kAllreduce, 64 << 20);
    ADD_FAILURE() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), kDirectTwoHosts);
  }
}

TEST(AlgorithmTable, HierarchicalLimitFollowsTheTuning) {
  Tuning t;
  t.hierarchical_min_bytes = 0;
  auto rows = default_rows(t);
  EXPECT_EQ(select(rows, kTwoHostsOfTwo, std::nullopt, kAllreduce, 0), A::kHierarchical);
  t.hierarchical_min_bytes = kAnyBytes;
  rows = default_rows(t);
  EXPECT_EQ(select(rows, kTwoHostsOfTwo, std::nullopt, kAllreduce, size_t{1} << 40), A::kRing);
  EXPECT_EQ(select(rows, kTwoHostsOfTwo, std::nullopt, kAllreduce, 4, Switch::kOn),
            A::kHierarchical);
}

// The rule the hierarchical rows stand for, written out, against the table
// over every consistent combination of facts, switch and sizes around the
// limit.
TEST(AlgorithmTable, HierarchicalRowsAgreeWithTheirRuleEverywhere) {
  int compared = 0;
  for (size_t limit : {size_t{0}, size_t{256} * KiB, size_t{4} << 20}) {
    Tuning t;
    t.hierarchical_min_bytes = limit;
    const auto rows = default_rows(t);
    std::vector<size_t> sizes = {0, 1, 4 * KiB, size_t{1} << 30, limit, limit + 1};
    if (limit > 0) sizes.push_back(limit - 1);
    for (Collective c : {kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall, kBarrier}) {
      for (int hosts : {1, 2, 5}) {
        for (bool shared : {false, true}) {
          for (bool even : {false, true}) {
            for (bool oversubscribed : {false, true}) {
              // A window only where every rank is on one host (shm allowed).
              for (bool window : hosts == 1 ? std::vector<bool>{false, true}
                                            : std::vector<bool>{false}) {
                const PlacementFacts f{hosts, window, oversubscribed, shared, even};
                for (Switch sw : {Switch::kUnset, Switch::kOn, Switch::kOff}) {
                  for (size_t bytes : sizes) {
                    SCOPED_TRACE(std::string(to_string(c)) + " hosts=" + std::to_string(hosts) +
                                 " shared=" + std::to_string(shared) +
                                 " even=" + std::to_string(even) +
                                 " window=" + std::to_string(window) +
                                 " switch=" + std::to_string(static_cast<int>(sw)) +
                                 " bytes=" + std::to_string(bytes) +
                                 " limit=" + std::to_string(limit));
                    const bool layered = hosts > 1 && shared &&
                                         (c == kAllgather || (c == kAllreduce && even));
                    const Algorithm flat =
                        previous_rules(f, AlgorithmChoice::kAuto, Tuning{}, c, bytes);
                    Algorithm want = flat;
                    if (layered && sw == Switch::kOn) want = A::kHierarchical;
                    if (layered && sw == Switch::kUnset && bytes >= limit) {
                      want = A::kHierarchical;
                    }
                    EXPECT_EQ(select(rows, f, std::nullopt, c, bytes, sw), want);
                    EXPECT_EQ(flat_because(f, c).empty(), hosts > 1 && shared &&
                                                              (c != kAllreduce || even));
                    ++compared;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 5000);
}

// The switch of each collective, from the configuration.
TEST(AlgorithmTable, SwitchesComeFromTheirVariables) {
  const std::map<std::string, std::string> env = {{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
                                                  {"HOROVOD_HIERARCHICAL_ALLGATHER", "0"}};
  const Config on = load_config(&env);
  EXPECT_EQ(hierarchical_switch(on, kAllreduce), Switch::kOn);
  EXPECT_EQ(hierarchical_switch(on, kAllgather), Switch::kOff);
  EXPECT_EQ(hierarchical_switch(on, kBroadcast), Switch::kUnset);
  EXPECT_EQ(hierarchical_switch(Config{}, kAllreduce), Switch::kUnset);
  EXPECT_EQ(hierarchical_switch(Config{}, kAllgather), Switch::kUnset);
}

// A new algorithm is one row: a row placed above the others wins where its
// placement and sizes match, and forcing finds it, without touching select().
TEST(AlgorithmTable, ARowAboveTheOthersTakesOverItsRange) {
  const auto defaults = default_rows(Tuning{});
  std::vector<Row> rows = {{kAllgather, Placement{.one_host = Need::kNo}, 1 * KiB, 64 * KiB,
                            Algorithm::kDirect}};
  rows.insert(rows.end(), defaults.begin(), defaults.end());
  EXPECT_EQ(select(rows, kTwoHosts, std::nullopt, kAllgather, 512), A::kRing);
  EXPECT_EQ(select(rows, kTwoHosts, std::nullopt, kAllgather, 4 * KiB), A::kDirect);
  EXPECT_EQ(select(rows, kTwoHosts, std::nullopt, kAllgather, 64 * KiB + 1), A::kRing);
  EXPECT_EQ(select(rows, kTwoHosts, A::kDirect, kAllgather, 0), A::kDirect);
  EXPECT_EQ(select(rows, kWindow, std::nullopt, kAllgather, 4 * KiB), A::kDirect);
}

TEST(AlgorithmTable, NoRowIsAnErrorNamingTheCollective) {
  const std::vector<Row> rows = {{kAllreduce, Placement{}, 0, kAnyBytes, Algorithm::kRing}};
  try {
    select(rows, kWindow, std::nullopt, kBarrier, 0);
    ADD_FAILURE() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("barrier"), std::string::npos) << e.what();
  }
  try {
    select(rows, kWindow, A::kDirect, kAllreduce, 0);
    ADD_FAILURE() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "RINGLET_ALGORITHM=direct has no allreduce algorithm (accepted here: auto|ring)");
  }
}

}  // namespace
}  // namespace ringlet::core::collectives
