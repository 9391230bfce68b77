// Broadcast through MPI (HOROVOD_CPU_OPERATIONS=MPI): MPI_Bcast from the root,
// in place, in pieces only where the buffer passes MPI's int counts.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/mpi/mpi_call.h"

namespace ringlet::core::collectives {

void mpi_broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root) {
  const MPI_Comm c = mpi_comm_of(comm);
  const MPI_Datatype type = mpi_datatype(dtype);
  const size_t es = dtype_size(dtype);
  const size_t most = mpi_max_count(comm);
  for (size_t at = 0; at < count; at += most) {
    const int n = static_cast<int>(std::min(most, count - at));
    void* piece = static_cast<std::byte*>(buffer) + at * es;
    mpi_call(comm, "MPI_Bcast", [&] { return MPI_Bcast(piece, n, type, root, c); });
  }
}

}  // namespace ringlet::core::collectives
