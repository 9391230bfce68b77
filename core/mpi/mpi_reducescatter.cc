// Reducescatter through MPI (HOROVOD_CPU_OPERATIONS=MPI): MPI_Reduce_scatter
// with each rank's share, then the result's one factor (the postscale, with an
// average's 1/n: kernels::ops::result_scale) on this rank's block. An output
// inside the input (MPI forbids the overlap) is reduced aside and copied in. A
// message past MPI's int counts goes as one reduce per rank to that rank, each
// in pieces.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/mpi/mpi_call.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::collectives {

void mpi_reducescatter(Communicator& comm, const void* send, void* recv,
                       std::span<const size_t> counts, DataType dtype, ReduceOp op,
                       double postscale) {
  const int n = comm.size();
  const int me = comm.rank();
  const size_t es = dtype_size(dtype);
  Workspace& ws = comm.workspace();
  const MPI_Comm c = mpi_comm_of(comm);
  const MPI_Datatype type = mpi_datatype(dtype);
  const MPI_Op mop = mpi_reduce_op(dtype, op);
  size_t total = 0;
  for (size_t k : counts) total += k;
  const size_t own_bytes = counts[me] * es;
  const auto* in = static_cast<const std::byte*>(send);
  auto* result = static_cast<std::byte*>(recv);
  if (own_bytes > 0 && result < in + total * es && in < result + own_bytes) {
    ws.fusion_buffer.resize(std::max(ws.fusion_buffer.size(), own_bytes));
    result = ws.fusion_buffer.data();
  }
  const size_t most = mpi_max_count(comm);
  if (total <= most) {
    std::vector<int>& ints = ws.mpi_recv_counts;
    ints.resize(n);
    for (int r = 0; r < n; ++r) ints[r] = static_cast<int>(counts[r]);
    mpi_call(comm, "MPI_Reduce_scatter", [&] {
      return MPI_Reduce_scatter(in, result, ints.data(), type, mop, c);
    });
  } else {
    size_t block = 0;
    for (int r = 0; r < n; ++r) {
      for (size_t at = 0; at < counts[r]; at += most) {
        const int k = static_cast<int>(std::min(most, counts[r] - at));
        const void* from = in + (block + at) * es;
        void* to = r == me ? result + at * es : nullptr;
        mpi_call(comm, "MPI_Reduce", [&] { return MPI_Reduce(from, to, k, type, mop, r, c); });
      }
      block += counts[r];
    }
  }
  kernels::cpu::scale(dtype, result, counts[me], kernels::ops::result_scale(op, postscale, n));
  if (result != recv && own_bytes > 0) kernels::cpu::copy(recv, result, own_bytes);
}

}  // namespace ringlet::core::collectives
