// Which algorithm runs a collective, from its kind, its size and where the
// ranks are. One table for every collective; RINGLET_ALGORITHM forces a row.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/communicator.h"

namespace ringlet::core::collectives {

enum class Collective { kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall, kBarrier };
enum class Algorithm {
  kRing,     // pipelined ring (pairwise exchange for alltoall) over pairs: any carrier
  kDirect,   // through the shared-memory window: every rank reads its peers' staging
  kOneStep,  // window, one flag: every rank reduces the whole message itself
};

std::string_view to_string(Collective c);
std::string_view to_string(Algorithm a);

// `bytes` must be the same on every rank (the whole message of the collective),
// so that every rank picks the same algorithm. Throws ConfigError naming
// RINGLET_ALGORITHM when the forced algorithm cannot run on this job.
Algorithm choose_algorithm(Communicator& comm, Collective c, size_t bytes);

}  // namespace ringlet::core::collectives
