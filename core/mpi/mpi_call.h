// What the MPI algorithms (mpi_*.cc) share: MPI's objects behind an
// MpiCommunicator, the datatype and reduction op of each Ringlet dtype and op,
// and mpi_call(), which runs one blocking MPI call under a deadline and turns
// its error code into a failure. Only files built with MPI include this.
#pragma once

#ifndef RINGLET_HAVE_MPI
#error "mpi_call.h is for builds with MPI (core/CMakeLists.txt leaves the mpi_*.cc files out otherwise)"
#endif

// Only MPI's C API: its deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <string>

#include "core/mpi/mpi_communicator.h"
#include "core/mpi/mpi_watchdog.h"
#include "core/collectives/workspace.h"
#include "core/communicator.h"
#include "ringlet/types.h"

namespace ringlet::core::collectives {

struct MpiCommunicator::Handles {
  MPI_Comm comm = MPI_COMM_NULL;
};

// The set's MPI communicator; the algorithm table picks kMpi only where there is one.
inline MPI_Comm mpi_comm_of(Communicator& comm) { return comm.mpi()->handles().comm; }

// The MPI datatype that moves `t`: MPI's own for every type it has, and
// MPI_UINT16_T for float16 and bfloat16, which MPI lacks (their reductions
// are Ringlet's ops, below, so MPI only moves their bits).
MPI_Datatype mpi_datatype(DataType t);

// The reduction of `op` on `t`: MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX for the
// integer types, and sum and prod for float32 and float64; an op of Ringlet's
// (MPI_Op_create over kernels::cpu::reduce) for float16 and bfloat16, and for
// the minimum and maximum of float32 and float64, whose NaN MPI does not
// define and the kernels propagate as every other path does. kAvg reduces as
// a sum: its 1/n is part of the result's one scale. The ops are created on
// first use and live until MPI is finalized.
MPI_Op mpi_reduce_op(DataType t, ReduceOp op);

// "MPI_Allreduce: <MPI's error string>" as a transport failure (the
// collective and the rank are added by the caller, collectives.cc).
[[noreturn]] void throw_mpi_error(const char* call, int code);

// Runs one blocking MPI call: the watchdog (mpi_watchdog.h) ends the job if it
// outlasts RINGLET_TIMEOUT_SECONDS; an error code becomes a failure naming it.
template <class Call>
void mpi_call(Communicator& comm, const char* name, Call&& call) {
  const MpiWatch watch(name, comm.config().timeout);
  const int code = call();
  if (code != MPI_SUCCESS) throw_mpi_error(name, code);
}

// The most elements one MPI call moves: MPI's counts and displacements are
// int. Tests lower it (Tuning::mpi_max_count) to reach the paths past it.
inline size_t mpi_max_count(Communicator& comm) {
  const size_t t = comm.workspace().tuning.mpi_max_count;
  return t == 0 || t > static_cast<size_t>(INT_MAX) ? static_cast<size_t>(INT_MAX) : t;
}

}  // namespace ringlet::core::collectives
