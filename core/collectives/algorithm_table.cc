// The algorithm table.
//
//   placement                       collective      size                       algorithm
//   one host, window (shm allowed)  allreduce       <= 8 KiB (128 KiB when     one-step
//                                                   ranks outnumber cores)
//                                   allreduce       larger                     direct
//                                   all others      any                        direct
//   several hosts, or tcp forced    all             any                        ring (pairwise for
//   alltoall)
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
// ring keeps every link busy. The choice depends only on facts every rank
// shares (size, local_size, the host's core count), so all ranks agree.
#include "core/collectives/algorithm_table.h"

#include "core/collectives/workspace.h"

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
  }
  return "algorithm";
}

Algorithm choose_algorithm(Communicator& comm, Collective c, size_t bytes) {
  const AlgorithmChoice forced = comm.config().algorithm;
  const bool window = comm.window() != nullptr;
  if (forced == AlgorithmChoice::kRing) return Algorithm::kRing;
  if (!window) {
    if (forced == AlgorithmChoice::kAuto) return Algorithm::kRing;
    const char* name = forced == AlgorithmChoice::kDirect ? "direct" : "onestep";
    std::string why = !comm.world().single_host()
                          ? "the job spans " + std::to_string(comm.world().cross_size) + " hosts"
                          : "shared memory is off (RINGLET_TRANSPORT=tcp)";
    throw ConfigError(std::string("RINGLET_ALGORITHM=") + name +
                      " needs every rank on one host with a shared-memory window, but " + why +
                      " (accepted here: auto|ring)");
  }
  const Tuning& t = comm.workspace().tuning;
  switch (forced) {
    case AlgorithmChoice::kDirect:
      return Algorithm::kDirect;
    case AlgorithmChoice::kOneStep:
      return c == Collective::kAllreduce ? Algorithm::kOneStep : Algorithm::kDirect;
    default:
      break;
  }
  const size_t onestep_max =
      t.oversubscribed ? t.onestep_max_oversubscribed_bytes : t.onestep_max_bytes;
  if (c == Collective::kAllreduce && bytes <= onestep_max) return Algorithm::kOneStep;
  return Algorithm::kDirect;
}

}  // namespace ringlet::core::collectives
