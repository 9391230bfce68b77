// Which algorithm runs a collective, as data: rows of {collective, placement,
// byte range, algorithm}, and select(), a pure function of the rows, the
// placement facts, the forced algorithm, the hierarchical switch and the
// message size. Nothing here needs a live communicator except facts_of(),
// which reads the facts off one, and choose_algorithm().
//
// The rows are tried in order; the first whose collective, placement and byte
// range all match wins. A placement requirement names, for each fact, whether
// the row needs it true, needs it false, or does not care. RINGLET_ALGORITHM
// forces an algorithm: the first row of that collective and algorithm whose
// placement matches wins whatever the size (see select()).
// HOROVOD_HIERARCHICAL_ALLREDUCE / _ALLGATHER switch the hierarchical rows of
// their collective: on, the first hierarchical row whose placement matches
// wins whatever the size (where none does, the flat rows choose); off, the
// hierarchical rows are passed over; unset, they compete by size like the
// others.
//
// Adding an algorithm is one row. The later ones will read, for example:
//   {kAllreduce, {.device_memory = kYes, .nccl = kYes}, 0, kAnyBytes, Algorithm::kNccl},
//   {kAllreduce, {.window = kYes, .device_memory = kYes}, 0, kAnyBytes, Algorithm::kCudaIpc},
// placed above the host-memory rows; a new fact is one more field at the end of
// PlacementFacts, one in Placement (kAny by default, so that no existing row
// changes) and one line in Placement::matches(). The algorithm itself is an
// enumerator and a name here and an entry in its collective's dispatch table
// (algorithms.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/collectives/workspace.h"
#include "core/communicator.h"
#include "core/config.h"

namespace ringlet::core::collectives {

enum class Collective { kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall, kBarrier };
enum class Algorithm {
  kRing,     // pipelined ring (pairwise exchange for alltoall) over pairs: any carrier
  kDirect,   // through the shared-memory window: every rank reads its peers' staging
  kOneStep,  // window, one flag: every rank reduces the whole message itself
  // within each host, then across hosts, then within again, each step by the
  // algorithm its group's own facts choose (hierarchical_allreduce.cc,
  // hierarchical_allgather.cc); not a RINGLET_ALGORITHM value
  kHierarchical,
  kMpi,  // MPI's own collective (HOROVOD_CPU_OPERATIONS=MPI), on the set's MPI communicator
  // device memory: reduce-scatter and allgather in one kernel per rank, the
  // kernels waiting on flags in each other's memory (host collectives run
  // direct, their two-step allreduce, in its place)
  kTwoShot,
};

std::string_view to_string(Collective c);
std::string_view to_string(Algorithm a);

// What every rank of a communicator knows alike about where the ranks are.
// Every field must be the same on every rank, so that all ranks pick the same
// algorithm.
struct PlacementFacts {
  int hosts = 1;                // hosts the communicator's ranks span
  bool window = false;          // a shared-memory window over all its ranks
  bool oversubscribed = false;  // more ranks on this host than cores
  bool shared_hosts = false;    // some host holds more than one of its ranks
  bool even_hosts = false;      // every host holds as many of its ranks as the others
  bool mpi = false;             // HOROVOD_CPU_OPERATIONS=MPI: an MPI communicator over its ranks
  // device memory: the ranks' kernels run at once (each on a GPU of its own,
  // or sharing GPUs through MPS), so a kernel waiting for a peer's never
  // holds the GPU while the peer's waits for a time slice
  bool concurrent_kernels = false;
  bool one_host() const { return hosts == 1; }
};

enum class Need : uint8_t { kAny, kYes, kNo };

// What a row asks of the placement, fact by fact.
struct Placement {
  Need one_host = Need::kAny;
  Need window = Need::kAny;
  Need oversubscribed = Need::kAny;
  Need shared_hosts = Need::kAny;
  Need even_hosts = Need::kAny;
  Need mpi = Need::kAny;
  Need concurrent_kernels = Need::kAny;
  bool matches(const PlacementFacts& f) const;
};

inline constexpr size_t kAnyBytes = std::numeric_limits<size_t>::max();

struct Row {
  Collective collective;
  Placement placement;
  size_t min_bytes;  // inclusive
  size_t max_bytes;  // inclusive
  Algorithm algorithm;
};

// Today's table; the one-step and hierarchical limits come from `t` (tests
// tune them on a live communicator). See algorithm_table.cc for why each row
// is where it is.
inline constexpr size_t kDefaultRows = 22;
std::array<Row, kDefaultRows> default_rows(const Tuning& t);

// The rows of device-memory allreduces between the ranks of one host
// (HOROVOD_GPU_OPERATIONS=RING; `window` is then the CUDA IPC window), chosen
// by select() as the host rows are; the other device collectives have one
// algorithm each. See algorithm_table.cc for why.
inline constexpr size_t kDeviceRows = 6;
std::array<Row, kDeviceRows> device_rows(const Tuning& t);

// HOROVOD_HIERARCHICAL_ALLREDUCE / _ALLGATHER for the collective at hand.
enum class Switch : uint8_t { kUnset, kOn, kOff };

// The algorithm for a collective of `bytes` (the whole message, the same on
// every rank: collectives whose local sizes differ pass 0). `forced` is
// RINGLET_ALGORITHM (nullopt: auto). A forced algorithm that the collective
// lacks runs its stand-in (one-step on a collective without one: direct). A
// forced algorithm that cannot run on these facts, or no row at all, throws
// ConfigError naming RINGLET_ALGORITHM and what it accepts here.
// `hierarchical` switches the hierarchical rows (see the top of this file);
// a forced algorithm outranks it (the configuration refuses the two together).
// Where MPI serves the host collectives (facts.mpi) its rows take every
// collective: RINGLET_ALGORITHM then concerns device tensors only, and the
// hierarchical switches can only be off (init refuses the other values).
Algorithm select(std::span<const Row> rows, const PlacementFacts& facts,
                 std::optional<Algorithm> forced, Collective c, size_t bytes,
                 Switch hierarchical = Switch::kUnset);

// RINGLET_ALGORITHM as select() takes it.
std::optional<Algorithm> forced_algorithm(AlgorithmChoice choice);
// HOROVOD_HIERARCHICAL_ALLREDUCE for allreduces, _ALLGATHER for allgathers;
// unset for the other collectives, which have no hierarchical rows.
Switch hierarchical_switch(const Config& config, Collective c);
// Why the hierarchical algorithm cannot run on these facts ("" where it can):
// the line choose_algorithm() logs where the switch is on but the flat
// algorithm runs.
std::string flat_because(const PlacementFacts& facts, Collective c);

// The facts of a live communicator.
PlacementFacts facts_of(Communicator& comm);

// What select() picks for `c` at every size, as one clause: "allreduce:
// onestep up to 8 KiB, direct from 8 KiB", or "allreduce: ring (forced)".
std::string describe_choice(std::span<const Row> rows, const PlacementFacts& facts,
                            std::optional<Algorithm> forced, Collective c, Switch hierarchical);

// select() over default_rows() with the communicator's facts, tuning,
// RINGLET_ALGORITHM and hierarchical switches. Says what it chose, as
// Horovod's and NCCL's logs do: at info level once per communicator (every
// collective's algorithm by size, and why), at debug level each time a
// collective's algorithm changes, at trace level each collective. Where a switch is on but the
// placement has no hierarchy to use, logs why the flat algorithm runs, once
// per communicator and collective: at debug level for one host or one rank
// per host (the hierarchical algorithm would be the flat one), at info level
// for hosts with different numbers of ranks (the allreduce's hierarchy needs
// them alike).
Algorithm choose_algorithm(Communicator& comm, Collective c, size_t bytes);

}  // namespace ringlet::core::collectives
