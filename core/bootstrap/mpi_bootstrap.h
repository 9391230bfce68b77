// Completing a launch through MPI. Under mpirun (or srun) the launcher gives
// every rank its rank and size but no rendezvous store; MPI itself is the one
// channel all ranks already share, so rank 0 picks the store's address and a
// secret and broadcasts them (the job id follows at rendezvous). After that the job bootstraps as
// under ringletrun, and MPI is not used again by the runtime.
#pragma once

#include "core/bootstrap/launch_info.h"

namespace ringlet::core {

// True when this build links MPI.
bool mpi_bootstrap_available();

// True when `launch` came from an MPI-style launcher and lacks a rendezvous
// that only MPI can supply.
bool needs_mpi_bootstrap(const LaunchInfo& launch);

// Fills launch.rendezvous and launch.secret, the same on every rank. Collective over MPI_COMM_WORLD: every rank must call it. Initializes
// MPI (MPI_THREAD_FUNNELED) when nobody has; MPI initialized here is
// finalized at process exit, not at shutdown(), because MPI cannot be
// initialized a second time and init() after shutdown() must work.
// Throws ConfigError when built without MPI or when MPI's world disagrees
// with the launcher's rank or size.
void complete_launch_with_mpi(LaunchInfo& launch);

}  // namespace ringlet::core
