// Barrier through MPI (HOROVOD_CPU_OPERATIONS=MPI): MPI_Barrier.
#include "core/collectives/algorithms.h"
#include "core/mpi/mpi_call.h"

namespace ringlet::core::collectives {

void mpi_barrier(Communicator& comm) {
  const MPI_Comm c = mpi_comm_of(comm);
  mpi_call(comm, "MPI_Barrier", [&] { return MPI_Barrier(c); });
}

}  // namespace ringlet::core::collectives
