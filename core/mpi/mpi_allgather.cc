// Allgather through MPI (HOROVOD_CPU_OPERATIONS=MPI): MPI_Allgatherv with each
// rank's own count (its tensor's first dimension times the rest), in place
// where this rank's block already sits in the output, as Horovod's MPI
// allgather runs it. A message past MPI's int counts and displacements goes
// instead as one broadcast per rank of its block, each in pieces.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/mpi/mpi_call.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::collectives {

void mpi_allgather(Communicator& comm, const void* send, void* recv, std::span<const size_t> counts,
                   DataType dtype) {
  const int n = comm.size();
  const int me = comm.rank();
  const size_t es = dtype_size(dtype);
  Workspace& ws = comm.workspace();
  std::vector<int>& displs = ws.mpi_recv_displs;
  std::vector<int>& ints = ws.mpi_recv_counts;
  size_t total = 0, own_at = 0;
  for (int r = 0; r < n; ++r) {
    if (r == me) own_at = total;
    total += counts[r];
  }
  auto* out = static_cast<std::byte*>(recv);
  const size_t own_bytes = counts[me] * es;
  const bool in_place = send == out + own_at * es;
  const auto* in = static_cast<const std::byte*>(send);
  if (!in_place && own_bytes > 0 && in < out + total * es && out < in + own_bytes) {
    // Another overlap: MPI forbids it, so the block is copied aside first.
    ws.fusion_buffer.resize(std::max(ws.fusion_buffer.size(), own_bytes));
    kernels::cpu::copy(ws.fusion_buffer.data(), in, own_bytes);
    in = ws.fusion_buffer.data();
  }
  if (total <= mpi_max_count(comm)) {
    ints.resize(n);
    displs.resize(n);
    size_t at = 0;
    for (int r = 0; r < n; ++r) {
      ints[r] = static_cast<int>(counts[r]);
      displs[r] = static_cast<int>(at);
      at += counts[r];
    }
    const MPI_Comm c = mpi_comm_of(comm);
    const MPI_Datatype type = mpi_datatype(dtype);
    const void* from = in_place ? MPI_IN_PLACE : in;
    mpi_call(comm, "MPI_Allgatherv", [&] {
      return MPI_Allgatherv(from, ints[me], type, recv, ints.data(), displs.data(), type, c);
    });
    return;
  }
  if (!in_place && own_bytes > 0) kernels::cpu::copy(out + own_at * es, in, own_bytes);
  size_t at = 0;
  for (int r = 0; r < n; ++r) {
    mpi_broadcast(comm, out + at * es, counts[r], dtype, r);
    at += counts[r];
  }
}

}  // namespace ringlet::core::collectives
