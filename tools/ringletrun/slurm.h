// Inside a Slurm allocation (salloc, sbatch) ringletrun hands the ranks to
// srun, as it hands them to mpirun with --mpi: Slurm then places them on the
// allocation's nodes, and each rank reads SLURM_PROCID, SLURM_NTASKS and
// SLURM_LOCALID, and meets the others at the rendezvous ringletrun names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ringletrun {

// True in an allocation but outside a job step (SLURM_JOB_ID set,
// SLURM_STEP_ID not): `srun ringletrun ...` is already a step, and its
// ringletrun starts its ranks itself.
bool in_slurm_allocation();

// The first host of a Slurm node list ("node[07-09,12],gpu3" -> "node07"),
// where srun's default block distribution puts task 0. Throws
// std::invalid_argument for a list it cannot read.
std::string first_slurm_host(std::string_view nodelist);

}  // namespace ringletrun
