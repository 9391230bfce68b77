// The algorithm table (default_rows() below is this, as data).
//
//   placement                       collective      size                       algorithm
//   one host, window (shm allowed)  allreduce       <= 8 KiB (128 KiB when     one-step
//                                                   ranks outnumber cores)
//                                   allreduce       larger                     direct
//                                   all others      any                        direct
//   several hosts, some host with   allreduce       >= 256 KiB                 hierarchical
//   more than one rank, every host  allgather       >= 256 KiB                 hierarchical
//   with as many (allreduce only)
//   several hosts, or tcp forced    all             any                        ring (pairwise
//                                                                              for alltoall)
//   HOROVOD_CPU_OPERATIONS=MPI      all             any                        mpi (above all
//                                                                              the others)
//
// RINGLET_ALGORITHM forces an algorithm at every size: ring runs anywhere;
// direct and onestep need the window (and say so otherwise); onestep on a
// collective other than allreduce runs that collective's direct algorithm.
// HOROVOD_HIERARCHICAL_ALLREDUCE=1 (_ALLGATHER=1) takes the hierarchical row
// at every size where its placement matches, and =0 never takes it.
//
// Why: within a host a flag in shared memory costs far less than a message,
// and the direct algorithms touch each byte fewer times than a ring (no
// forwarding through n-1 hops). One-step trades (n-1)/n of redundant
// reduction work for a single synchronisation instead of three. Measured here
// (2 cores, best of 8 batches): np=2, ranks on their own cores, one-step and
// direct tie up to 8 KiB (0.6-1.0 us) and direct wins above (16 KiB 1.6 vs
// 1.8 us, 64 KiB 5.1 vs 6.4 us); np=3 and 4 on 2 cores, where every
// synchronisation may cost a wake-up, one-step wins through 128 KiB (64 KiB:
// 69-80 vs 135-240 us at np=3; 78 vs 136 us at np=4). Across hosts only the
// ring keeps every link busy.
//
// The hierarchical row, across H hosts of L ranks: the flat ring sends
// 2(HL-1)/(HL) of the message out of each host, in 2(HL-1) steps each as slow
// as the slowest link it crosses; the hierarchical allreduce reduces within
// the host over shared memory, sends 2(H-1)/H of the message out of each host
// (as L rings of 1/L of it, one per local index), in 2(H-1) network steps,
// and gathers within the host again. For two hosts of two ranks that is a
// third fewer bytes on the network and 2 network steps instead of 6; for two
// hosts of eight, nearly half the bytes. The cost is two or three passes
// through the host's window, each a synchronisation that may cost a wake-up
// (50-200 us above) when ranks outnumber cores. Until it is measured on a
// real link the row starts where the bytes saved clearly outweigh that: at
// 256 KiB, 10 Gb/s saves ~100 us of transfer and 4 network latencies at two
// hosts of two, against at most a few wake-ups. The allgather's saving is
// alike: (H-1)/H of the message leaves each host instead of (HL-1)/(HL), in
// H-1 network steps instead of HL-1. The allreduce needs every host to hold
// as many ranks (its slices are one per local index); the allgather goes
// through each host's first rank and takes any layout. One host, or one rank
// per host, has no hierarchy: the flat algorithm is the hierarchical one.
//
// The choice depends only on facts every rank shares (size, the hosts' rank
// counts, the host's core count, settings checked alike at init), so all
// ranks agree.
//
// HOROVOD_CPU_OPERATIONS=MPI is the user's choice of MPI's algorithms for
// every host collective (a job-wide setting), so its rows come first and
// neither RINGLET_ALGORITHM nor the hierarchical switches override them.
//
// Device memory (HOROVOD_GPU_OPERATIONS=RING, ranks of one host on the CUDA
// IPC window), allreduce; device_rows():
//   kernels at once (own GPUs, or MPS)  <= 256 KiB   onestep (one kernel per rank: every
//                                                    rank folds every peer's half)
//                                       larger       twoshot (one kernel per rank: rank i
//                                                    folds part i into every output)
//   the kernels take turns              any          direct (host flags, events)
// RINGLET_ALGORITHM forces onestep, twoshot, direct or ring at every size.
// Why: onestep and twoshot synchronise inside their kernels through flags in
// each other's memory (core/gpu/ipc_peer_allreduce.cc), with no host round
// trip per step: the fastest intra-node allreduces work that way. But a
// kernel waiting on a flag holds its GPU; where ranks share a GPU without
// MPS their contexts take turns by time slice, so each flag step can cost a
// slice, and the host-flag algorithms, whose streams wait on events instead,
// keep the table there until measurements say otherwise. One-shot reads n
// inputs per element against two-shot's one, but it has one kernel and no
// second pass through every peer's memory: it wins while latency, not
// bandwidth, sets the time (vLLM's and TensorRT-LLM's switch points lie
// between 256 KiB and 1 MiB for two to eight GPUs).
#include "core/collectives/algorithm_table.h"

#include <vector>

#include "ringlet/common/logging.h"

namespace ringlet::core::collectives {

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::kAllreduce:
      return "allreduce";
    case Collective::kAllgather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReducescatter:
      return "reducescatter";
    case Collective::kAlltoall:
      return "alltoall";
    case Collective::kBarrier:
      return "barrier";
  }
  return "collective";
}

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kOneStep:
      return "onestep";
    case Algorithm::kHierarchical:
      return "hierarchical";
    case Algorithm::kMpi:
      return "mpi";
    case Algorithm::kTwoShot:
      return "twoshot";
  }
  return "algorithm";
}

namespace {

bool holds(Need need, bool fact) {
  return need == Need::kAny || (need == Need::kYes) == fact;
}

// The run on a collective that lacks the forced algorithm: one-step is the
// window's single-synchronisation allreduce; elsewhere the window's direct
// algorithm is its nearest kin. nullopt: no stand-in.
std::optional<Algorithm> stand_in(Algorithm a) {
  if (a == Algorithm::kOneStep || a == Algorithm::kTwoShot) return Algorithm::kDirect;
  return std::nullopt;
}

// "needs <what the row asks>, but <what this job lacks>".
std::string shortfall(const Placement& need, const PlacementFacts& f) {
  if (need.window == Need::kYes && !f.window) {
    return "needs every rank on one host with a shared-memory window, but " +
           (!f.one_host() ? "the job spans " + std::to_string(f.hosts) + " hosts"
                          : std::string("shared memory is off (RINGLET_TRANSPORT=tcp)"));
  }
  if (need.one_host != Need::kAny && !holds(need.one_host, f.one_host())) {
    return need.one_host == Need::kYes
               ? "needs every rank on one host, but the job spans " + std::to_string(f.hosts) +
                     " hosts"
               : std::string("needs ranks on several hosts, but the job has one");
  }
  if (need.oversubscribed != Need::kAny && !holds(need.oversubscribed, f.oversubscribed)) {
    return need.oversubscribed == Need::kYes ? "needs more ranks than cores, but each has one"
                                             : "needs a core per rank, but ranks outnumber cores";
  }
  if (need.shared_hosts == Need::kYes && !f.shared_hosts) {
    return "needs a host with more than one rank, but each has one";
  }
  if (need.even_hosts == Need::kYes && !f.even_hosts) {
    return "needs as many ranks on every host, but the hosts hold different numbers";
  }
  return "cannot run here";
}

// "auto|ring": what RINGLET_ALGORITHM may force for `c` on these facts.
std::string accepted_here(std::span<const Row> rows, const PlacementFacts& f, Collective c) {
  std::string out = "auto";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    // The hierarchical rows answer to their own switches, not RINGLET_ALGORITHM.
    if (r.algorithm == Algorithm::kHierarchical) continue;
    if (r.collective != c || !r.placement.matches(f)) continue;
    bool seen = false;
    for (size_t j = 0; j < i; ++j) {
      seen = seen || (rows[j].collective == c && rows[j].algorithm == r.algorithm &&
                      rows[j].placement.matches(f));
    }
    if (!seen) out += "|" + std::string(to_string(r.algorithm));
  }
  return out;
}

const Row* first_row(std::span<const Row> rows, Collective c, Algorithm a) {
  for (const Row& r : rows) {
    if (r.collective == c && r.algorithm == a) return &r;
  }
  return nullptr;
}

Algorithm select_forced(std::span<const Row> rows, const PlacementFacts& f, Algorithm forced,
                        Collective c) {
  const std::string var = "RINGLET_ALGORITHM=" + std::string(to_string(forced));
  std::optional<Algorithm> a = forced;
  while (a && first_row(rows, c, *a) == nullptr) a = stand_in(*a);
  if (!a) {
    throw ConfigError(var + " has no " + std::string(to_string(c)) + " algorithm (accepted here: " +
                      accepted_here(rows, f, c) + ")");
  }
  for (const Row& r : rows) {
    if (r.collective == c && r.algorithm == *a && r.placement.matches(f)) return *a;
  }
  throw ConfigError(var + " " + shortfall(first_row(rows, c, *a)->placement, f) +
                    " (accepted here: " + accepted_here(rows, f, c) + ")");
}

}  // namespace

bool Placement::matches(const PlacementFacts& f) const {
  return holds(one_host, f.one_host()) && holds(window, f.window) &&
         holds(oversubscribed, f.oversubscribed) && holds(shared_hosts, f.shared_hosts) &&
         holds(even_hosts, f.even_hosts) && holds(mpi, f.mpi) &&
         holds(concurrent_kernels, f.concurrent_kernels);
}

// The limits read here must be the ones choose_algorithm() compares.
std::array<Row, kDefaultRows> default_rows(const Tuning& t) {
  using enum Collective;
  constexpr Need kYes = Need::kYes, kNo = Need::kNo;
  const Placement window{.window = kYes};
  const Placement window_own_cores{.window = kYes, .oversubscribed = kNo};
  const Placement window_oversubscribed{.window = kYes, .oversubscribed = kYes};
  const Placement anywhere{};
  const Placement hosts_in_layers{.one_host = kNo, .shared_hosts = kYes};
  const Placement even_hosts_in_layers{.one_host = kNo, .shared_hosts = kYes, .even_hosts = kYes};
  const Placement mpi{.mpi = kYes};
  return {{
      {kAllreduce, mpi, 0, kAnyBytes, Algorithm::kMpi},
      {kAllgather, mpi, 0, kAnyBytes, Algorithm::kMpi},
      {kBroadcast, mpi, 0, kAnyBytes, Algorithm::kMpi},
      {kReducescatter, mpi, 0, kAnyBytes, Algorithm::kMpi},
      {kAlltoall, mpi, 0, kAnyBytes, Algorithm::kMpi},
      {kBarrier, mpi, 0, kAnyBytes, Algorithm::kMpi},
      {kAllreduce, window_own_cores, 0, t.onestep_max_bytes, Algorithm::kOneStep},
      {kAllreduce, window_oversubscribed, 0, t.onestep_max_oversubscribed_bytes,
       Algorithm::kOneStep},
      {kAllreduce, window, 0, kAnyBytes, Algorithm::kDirect},
      {kAllgather, window, 0, kAnyBytes, Algorithm::kDirect},
      {kBroadcast, window, 0, kAnyBytes, Algorithm::kDirect},
      {kReducescatter, window, 0, kAnyBytes, Algorithm::kDirect},
      {kAlltoall, window, 0, kAnyBytes, Algorithm::kDirect},
      {kBarrier, window, 0, kAnyBytes, Algorithm::kDirect},
      {kAllreduce, even_hosts_in_layers, t.hierarchical_min_bytes, kAnyBytes,
       Algorithm::kHierarchical},
      {kAllgather, hosts_in_layers, t.hierarchical_min_bytes, kAnyBytes, Algorithm::kHierarchical},
      {kAllreduce, anywhere, 0, kAnyBytes, Algorithm::kRing},
      {kAllgather, anywhere, 0, kAnyBytes, Algorithm::kRing},
      {kBroadcast, anywhere, 0, kAnyBytes, Algorithm::kRing},
      {kReducescatter, anywhere, 0, kAnyBytes, Algorithm::kRing},
      {kAlltoall, anywhere, 0, kAnyBytes, Algorithm::kRing},
      {kBarrier, anywhere, 0, kAnyBytes, Algorithm::kRing},
  }};
}

std::array<Row, kDeviceRows> device_rows(const Tuning& t) {
  using enum Collective;
  constexpr Need kYes = Need::kYes;
  const Placement window{.window = kYes};
  const Placement window_concurrent{.window = kYes, .concurrent_kernels = kYes};
  return {{
      {kAllreduce, window_concurrent, 0, t.device_onestep_max_bytes, Algorithm::kOneStep},
      {kAllreduce, window_concurrent, 0, kAnyBytes, Algorithm::kTwoShot},
      {kAllreduce, window, 0, kAnyBytes, Algorithm::kDirect},
      // What RINGLET_ALGORITHM may force where the kernels take turns.
      {kAllreduce, window, 0, kAnyBytes, Algorithm::kOneStep},
      {kAllreduce, window, 0, kAnyBytes, Algorithm::kTwoShot},
      {kAllreduce, window, 0, kAnyBytes, Algorithm::kRing},
  }};
}

Algorithm select(std::span<const Row> rows, const PlacementFacts& facts,
                 std::optional<Algorithm> forced, Collective c, size_t bytes,
                 Switch hierarchical) {
  if (forced && !facts.mpi) return select_forced(rows, facts, *forced, c);
  if (hierarchical == Switch::kOn && !facts.mpi) {
    for (const Row& r : rows) {
      if (r.collective == c && r.algorithm == Algorithm::kHierarchical &&
          r.placement.matches(facts)) {
        return r.algorithm;
      }
    }
  }
  for (const Row& r : rows) {
    // Switched on, the hierarchical rows had their turn above; off, none.
    if (r.algorithm == Algorithm::kHierarchical && hierarchical != Switch::kUnset) continue;
    if (r.collective == c && r.placement.matches(facts) && r.min_bytes <= bytes &&
        bytes <= r.max_bytes) {
      return r.algorithm;
    }
  }
  throw ConfigError("RINGLET_ALGORITHM=auto: no " + std::string(to_string(c)) +
                    " algorithm runs on this placement at " + std::to_string(bytes) + " bytes");
}

std::optional<Algorithm> forced_algorithm(AlgorithmChoice choice) {
  switch (choice) {
    case AlgorithmChoice::kRing:
      return Algorithm::kRing;
    case AlgorithmChoice::kDirect:
      return Algorithm::kDirect;
    case AlgorithmChoice::kOneStep:
      return Algorithm::kOneStep;
    case AlgorithmChoice::kTwoShot:
      return Algorithm::kTwoShot;
    case AlgorithmChoice::kAuto:
      break;
  }
  return std::nullopt;
}

Switch hierarchical_switch(const Config& config, Collective c) {
  std::optional<bool> on;
  if (c == Collective::kAllreduce) on = config.hierarchical_allreduce;
  if (c == Collective::kAllgather) on = config.hierarchical_allgather;
  if (!on) return Switch::kUnset;
  return *on ? Switch::kOn : Switch::kOff;
}

std::string flat_because(const PlacementFacts& f, Collective c) {
  if (f.one_host()) return "every rank is on one host";
  if (!f.shared_hosts) return "each host holds one rank";
  if (c == Collective::kAllreduce && !f.even_hosts) {
    return "the hosts hold different numbers of ranks";
  }
  return "";
}

PlacementFacts facts_of(Communicator& comm) {
  const World& w = comm.world();
  PlacementFacts f{.hosts = w.cross_size,
                   .window = comm.window() != nullptr,
                   .oversubscribed = comm.workspace().tuning.oversubscribed,
                   .mpi = comm.mpi() != nullptr};
  f.even_hosts = true;
  for (const std::vector<int>& ranks : w.ranks_on_host) {
    f.shared_hosts = f.shared_hosts || ranks.size() > 1;
    f.even_hosts = f.even_hosts && ranks.size() == w.ranks_on_host.front().size();
  }
  return f;
}

namespace {

// "8 KiB", "1 MiB", "300 B": the sizes of the table's limits.
std::string bytes_text(size_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

}  // namespace

std::string describe_choice(std::span<const Row> rows, const PlacementFacts& facts,
                            std::optional<Algorithm> forced, Collective c, Switch hierarchical) {
  std::string text = std::string(to_string(c)) + ": ";
  if (forced && !facts.mpi) {
    return text + std::string(to_string(select(rows, facts, forced, c, 0, hierarchical))) +
           " (RINGLET_ALGORITHM)";
  }
  // The sizes where a row of this collective starts or ends are the only
  // places the choice can change.
  std::vector<size_t> starts = {0};
  for (const Row& r : rows) {
    if (r.collective != c || !r.placement.matches(facts)) continue;
    starts.push_back(r.min_bytes);
    if (r.max_bytes != kAnyBytes) starts.push_back(r.max_bytes + 1);
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  std::vector<std::pair<size_t, Algorithm>> runs;  // from size, algorithm
  for (size_t from : starts) {
    const Algorithm a = select(rows, facts, std::nullopt, c, from, hierarchical);
    if (runs.empty() || runs.back().second != a) runs.emplace_back(from, a);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    text += i == 0 ? "" : ", ";
    text += to_string(runs[i].second);
    if (runs.size() == 1) break;
    if (i + 1 < runs.size()) {
      // "up to 8 KiB" where the row ends on a round size, else "below 256 KiB".
      const size_t next = runs[i + 1].first;
      const std::string last = bytes_text(next - 1);
      text += last.ends_with(" B") ? " below " + bytes_text(next) : " up to " + last;
    } else {
      // "from 256 KiB", or "above 8 KiB" after a row that ended on 8 KiB.
      const size_t first = runs[i].first;
      const std::string before = bytes_text(first - 1);
      text += bytes_text(first).ends_with(" B") && !before.ends_with(" B")
                  ? " above " + before
                  : " from " + bytes_text(first);
    }
  }
  if (hierarchical != Switch::kUnset && c != Collective::kBarrier) {
    text += std::string(" (") +
            (c == Collective::kAllreduce ? "HOROVOD_HIERARCHICAL_ALLREDUCE="
                                         : "HOROVOD_HIERARCHICAL_ALLGATHER=") +
            (hierarchical == Switch::kOn ? "1" : "0") + ")";
  }
  return text;
}

namespace {

// "world, 2 hosts (ranks per host: 2, 2), a shared-memory window": what the
// table's rows were matched against.
std::string facts_text(Communicator& comm, const PlacementFacts& f);

// "2, 1": the ranks on each host, in host order.
std::string ranks_per_host(const World& w) {
  std::string text;
  for (const std::vector<int>& ranks : w.ranks_on_host) {
    text += (text.empty() ? "" : ", ") + std::to_string(ranks.size());
  }
  return text;
}

// The switch is on, yet the flat algorithm runs: said once per communicator
// and collective.
void tell_flat(Communicator& comm, const PlacementFacts& f, Collective c) {
  uint32_t& told = comm.workspace().flat_despite_switch;
  const uint32_t bit = uint32_t{1} << static_cast<int>(c);
  if ((told & bit) != 0) return;
  told |= bit;
  const std::string var = c == Collective::kAllreduce ? "HOROVOD_HIERARCHICAL_ALLREDUCE"
                                                      : "HOROVOD_HIERARCHICAL_ALLGATHER";
  const std::string why = flat_because(f, c);
  // Uneven hosts are a hierarchy this version leaves flat: worth an info
  // line. On one host, or one rank per host, the flat algorithm is the
  // hierarchical one.
  const bool uneven = !f.one_host() && f.shared_hosts;
  common::log(uneven ? common::LogLevel::kInfo : common::LogLevel::kDebug,
              "%s=1: %s (ranks per host: %s), so the %s runs flat", var.c_str(), why.c_str(),
              ranks_per_host(comm.world()).c_str(), std::string(to_string(c)).c_str());
}

std::string facts_text(Communicator& comm, const PlacementFacts& f) {
  std::string text = f.one_host() ? "one host"
                                  : std::to_string(f.hosts) + " hosts (ranks per host: " +
                                        ranks_per_host(comm.world()) + ")";
  text += f.window ? ", a shared-memory window" : ", no shared-memory window";
  if (f.oversubscribed) text += ", more ranks than cores";
  if (f.mpi) text += ", MPI's collectives (HOROVOD_CPU_OPERATIONS=MPI)";
  return text;
}

// The table for this communicator, once, and each change of a collective's
// algorithm, and each collective: the decisions a user asks the log about.
void tell_choice(Communicator& comm, const std::array<Row, kDefaultRows>& rows,
                 const PlacementFacts& facts, std::optional<Algorithm> forced, Collective c,
                 size_t bytes, Algorithm a) {
  Workspace& w = comm.workspace();
  // Every collective passes here: nothing is formatted unless a line is printed.
  const auto who = [&comm] {
    return comm.name().empty()
               ? std::string("the job's ranks")
               : "'" + comm.name() + "' (" + std::to_string(comm.size()) + " ranks)";
  };
  if (!w.choices_told && common::log_enabled(common::LogLevel::kInfo)) {
    std::string table;
    for (Collective each : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                            Collective::kReducescatter, Collective::kAlltoall,
                            Collective::kBarrier}) {
      table += (table.empty() ? "" : "; ") +
               describe_choice(rows, facts, forced, each, hierarchical_switch(comm.config(), each));
    }
    common::log(common::LogLevel::kInfo, "algorithms for %s on %s: %s", who().c_str(),
                facts_text(comm, facts).c_str(), table.c_str());
  }
  w.choices_told = true;
  int& last = w.last_algorithm[static_cast<size_t>(c)];
  if (last >= 0 && last != static_cast<int>(a) && common::log_enabled(common::LogLevel::kDebug)) {
    common::log(common::LogLevel::kDebug, "%s for %s: %s from here on (%zu bytes), was %s",
                std::string(to_string(c)).c_str(), who().c_str(),
                std::string(to_string(a)).c_str(), bytes,
                std::string(to_string(static_cast<Algorithm>(last))).c_str());
  }
  last = static_cast<int>(a);
  if (common::log_enabled(common::LogLevel::kTrace)) {
    common::log(common::LogLevel::kTrace, "%s of %zu bytes for %s: %s",
                std::string(to_string(c)).c_str(), bytes, who().c_str(),
                std::string(to_string(a)).c_str());
  }
}

}  // namespace

Algorithm choose_algorithm(Communicator& comm, Collective c, size_t bytes) {
  // Every collective asks, so the rows are built again only when a test has
  // retuned the limits they read.
  thread_local Tuning built_for;
  thread_local std::array<Row, kDefaultRows> rows = default_rows(built_for);
  const Tuning& t = comm.workspace().tuning;
  if (t.onestep_max_bytes != built_for.onestep_max_bytes ||
      t.onestep_max_oversubscribed_bytes != built_for.onestep_max_oversubscribed_bytes ||
      t.hierarchical_min_bytes != built_for.hierarchical_min_bytes) {
    built_for = t;
    rows = default_rows(t);
  }
  const PlacementFacts facts = facts_of(comm);
  const Switch hierarchical = hierarchical_switch(comm.config(), c);
  const std::optional<Algorithm> forced = forced_algorithm(comm.config().algorithm);
  const Algorithm a = select(rows, facts, forced, c, bytes, hierarchical);
  if (hierarchical == Switch::kOn && !forced && a != Algorithm::kHierarchical) {
    tell_flat(comm, facts, c);
  }
  tell_choice(comm, rows, facts, forced, c, bytes, a);
  return a;
}

}  // namespace ringlet::core::collectives
