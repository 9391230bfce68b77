// MPI at start-up, for two purposes.
//
// Completing a launch. Under mpirun (or srun) the launcher gives every rank
// its rank and size but no rendezvous store; MPI itself is the one channel all
// ranks already share, so rank 0 picks the store's address and a secret and
// broadcasts them (the job id follows at rendezvous). After that the job
// bootstraps as under ringletrun.
//
// HOROVOD_CPU_OPERATIONS=MPI. The host collectives run through MPI
// (core/mpi/mpi_*), which needs every rank in MPI_COMM_WORLD (a job
// launched by mpirun, or by srun with MPI support) and, since the runtime's
// background thread makes the calls while init() ran on the caller's thread,
// at least MPI_THREAD_SERIALIZED.
//
// MPI initialized here asks for MPI_THREAD_SERIALIZED (Ringlet makes one MPI
// call at a time; MPI_THREAD_MULTIPLE would cost Open MPI locks on every call)
// and is finalized at process exit, not at shutdown(), because MPI cannot be
// initialized a second time and init() after shutdown() must work. A program
// that makes MPI calls of its own beside Ringlet's initializes MPI itself,
// with MPI_THREAD_MULTIPLE (mpi4py's default), before init().
#pragma once

#include "core/bootstrap/launch_info.h"

namespace ringlet::core {

// True when this build links MPI.
bool mpi_bootstrap_available();

// True when `launch` came from an MPI-style launcher and lacks a rendezvous
// that only MPI can supply.
bool needs_mpi_bootstrap(const LaunchInfo& launch);

// Fills launch.rendezvous and launch.secret, the same on every rank.
// Collective over MPI_COMM_WORLD: every rank must call it. Initializes MPI
// when nobody has. Throws ConfigError when built without MPI or when MPI's
// world disagrees with the launcher's rank or size.
void complete_launch_with_mpi(LaunchInfo& launch);

// HOROVOD_CPU_OPERATIONS=MPI, before the rendezvous, with MPI's local queries
// only: ConfigError when this build has no MPI, when a job of more than one
// rank was not launched by mpirun or srun, or when the program initialized
// MPI itself below MPI_THREAD_SERIALIZED (refused on every rank here, not
// after the rendezvous, where the first refusal would take the store away). A job of one rank needs no MPI: its
// collectives are local copies, as MPI's would be. (Settings that contradict
// it are refused by load_config.)
void check_mpi_operations(const LaunchInfo& launch);

// HOROVOD_CPU_OPERATIONS=MPI with more than one rank, after the rendezvous
// (where every rank was found to ask for it): initializes MPI when nobody
// has, then ConfigError when it gives less than MPI_THREAD_SERIALIZED, was
// finalized, or its world is not the launch's.
void start_mpi_operations(const LaunchInfo& launch);

}  // namespace ringlet::core
