// Which algorithm runs a collective, as data: rows of {collective, placement,
// byte range, algorithm}, and select(), a pure function of the rows, the
// placement facts, the forced algorithm and the message size. Nothing here
// needs a live communicator except facts_of(), which reads the facts off one.
//
// The rows are tried in order; the first whose collective, placement and byte
// range all match wins. A placement requirement names, for each fact, whether
// the row needs it true, needs it false, or does not care. RINGLET_ALGORITHM
// forces an algorithm: the first row of that collective and algorithm whose
// placement matches wins whatever the size (see select()).
//
// Adding an algorithm is one row. The later ones will read, for example:
//   {kAllreduce, {.device_memory = kYes, .nccl = kYes}, 0, kAnyBytes, Algorithm::kNccl},
//   {kAllreduce, {.window = kYes, .device_memory = kYes}, 0, kAnyBytes, Algorithm::kCudaIpc},
//   {kAllreduce, {.one_host = kNo, .hierarchical = kYes}, 0, kAnyBytes,
//    Algorithm::kHierarchical},
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
  kMpi,      // MPI's own collective (HOROVOD_CPU_OPERATIONS=MPI), on the set's MPI communicator
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
  bool mpi = false;             // HOROVOD_CPU_OPERATIONS=MPI: an MPI communicator over its ranks
  bool one_host() const { return hosts == 1; }
};

enum class Need : uint8_t { kAny, kYes, kNo };

// What a row asks of the placement, fact by fact.
struct Placement {
  Need one_host = Need::kAny;
  Need window = Need::kAny;
  Need oversubscribed = Need::kAny;
  Need mpi = Need::kAny;
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

// Today's table; the one-step limits come from `t` (tests tune them on a live
// communicator). See algorithm_table.cc for why each row is where it is.
inline constexpr size_t kDefaultRows = 20;
std::array<Row, kDefaultRows> default_rows(const Tuning& t);

// The algorithm for a collective of `bytes` (the whole message, the same on
// every rank: collectives whose local sizes differ pass 0). `forced` is
// RINGLET_ALGORITHM (nullopt: auto). A forced algorithm that the collective
// lacks runs its stand-in (one-step on a collective without one: direct). A
// forced algorithm that cannot run on these facts, or no row at all, throws
// ConfigError naming RINGLET_ALGORITHM and what it accepts here. Where MPI
// serves the host collectives (facts.mpi) nothing is forced: RINGLET_ALGORITHM
// then concerns device tensors only (Communicator::create refuses the values
// that have no meaning there).
Algorithm select(std::span<const Row> rows, const PlacementFacts& facts,
                 std::optional<Algorithm> forced, Collective c, size_t bytes);

// RINGLET_ALGORITHM as select() takes it.
std::optional<Algorithm> forced_algorithm(AlgorithmChoice choice);

// The facts of a live communicator.
PlacementFacts facts_of(Communicator& comm);

// select() over default_rows() with the communicator's facts, tuning and
// RINGLET_ALGORITHM.
Algorithm choose_algorithm(Communicator& comm, Collective c, size_t bytes);

}  // namespace ringlet::core::collectives
