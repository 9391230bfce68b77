// Alltoall through MPI (HOROVOD_CPU_OPERATIONS=MPI): MPI_Alltoallv with the
// per-rank splits, as Horovod's MPI alltoall runs it. An input that overlaps
// the output (in place) is copied aside first: MPI forbids the overlap. A
// message past MPI's int counts goes as a pairwise exchange (at step s rank r
// sends to r+s and receives from r-s), each block in pieces posted at once.
// Each rank knows only its own splits, so the ranks agree on the way with one
// small MPI_Allreduce first.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/mpi/mpi_call.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/transport/transport.h"

namespace ringlet::core::collectives {

namespace {

// One step of the pairwise exchange: `send_count` elements at `send_block`
// to rank `to`, `recv_count` at `recv_block` from rank `from`, in pieces of at
// most `most` (piece j is tag j: both ends cut a block alike), all posted at
// once and waited for together. A post that fails fails the collective, and
// with it the communicator; the pieces already posted are left to MPI.
void exchange(Communicator& comm, const std::byte* send_block, size_t send_count, int to,
              std::byte* recv_block, size_t recv_count, int from, DataType dtype, size_t most) {
  const MPI_Comm c = mpi_comm_of(comm);
  const MPI_Datatype type = mpi_datatype(dtype);
  const size_t es = dtype_size(dtype);
  std::vector<MPI_Request> reqs;
  reqs.reserve((send_count + recv_count) / most + 2);
  for (size_t at = 0, j = 0; at < recv_count; at += most, ++j) {
    const int k = static_cast<int>(std::min(most, recv_count - at));
    MPI_Request& r = reqs.emplace_back(MPI_REQUEST_NULL);
    const int code = MPI_Irecv(recv_block + at * es, k, type, from, static_cast<int>(j), c, &r);
    if (code != MPI_SUCCESS) throw_mpi_error("MPI_Irecv", code);
  }
  for (size_t at = 0, j = 0; at < send_count; at += most, ++j) {
    const int k = static_cast<int>(std::min(most, send_count - at));
    MPI_Request& r = reqs.emplace_back(MPI_REQUEST_NULL);
    const int code = MPI_Isend(send_block + at * es, k, type, to, static_cast<int>(j), c, &r);
    if (code != MPI_SUCCESS) throw_mpi_error("MPI_Isend", code);
  }
  mpi_call(comm, "MPI_Waitall", [&] {
    return MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  });
}

}  // namespace

void mpi_alltoall(Communicator& comm, const void* send, std::span<const size_t> send_counts,
                  void* recv, std::span<const size_t> recv_counts, DataType dtype) {
  const int n = comm.size();
  const int me = comm.rank();
  const size_t es = dtype_size(dtype);
  Workspace& ws = comm.workspace();
  if (recv_counts[me] != send_counts[me]) {
    throw transport::Error(me, "alltoall: rank " + std::to_string(me) + " sends itself " +
                                   std::to_string(send_counts[me]) + " elements but expects " +
                                   std::to_string(recv_counts[me]));
  }
  size_t send_total = 0, recv_total = 0;
  for (int r = 0; r < n; ++r) {
    send_total += send_counts[r];
    recv_total += recv_counts[r];
  }
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  if (send_total > 0 && recv_total > 0 && in < out + recv_total * es &&
      out < in + send_total * es) {
    ws.fusion_buffer.resize(std::max(ws.fusion_buffer.size(), send_total * es));
    kernels::cpu::copy(ws.fusion_buffer.data(), in, send_total * es);
    in = ws.fusion_buffer.data();
  }
  const size_t most = mpi_max_count(comm);
  int too_large = send_total > most || recv_total > most;
  mpi_call(comm, "MPI_Allreduce", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, &too_large, 1, MPI_INT, MPI_MAX, mpi_comm_of(comm));
  });
  if (!too_large) {
    std::vector<int>& sc = ws.mpi_send_counts;
    std::vector<int>& sd = ws.mpi_send_displs;
    std::vector<int>& rc = ws.mpi_recv_counts;
    std::vector<int>& rd = ws.mpi_recv_displs;
    sc.resize(n);
    sd.resize(n);
    rc.resize(n);
    rd.resize(n);
    int s_at = 0, r_at = 0;
    for (int r = 0; r < n; ++r) {
      sc[r] = static_cast<int>(send_counts[r]);
      rc[r] = static_cast<int>(recv_counts[r]);
      sd[r] = s_at;
      rd[r] = r_at;
      s_at += sc[r];
      r_at += rc[r];
    }
    const MPI_Comm c = mpi_comm_of(comm);
    const MPI_Datatype type = mpi_datatype(dtype);
    mpi_call(comm, "MPI_Alltoallv", [&] {
      return MPI_Alltoallv(in, sc.data(), sd.data(), type, out, rc.data(), rd.data(), type, c);
    });
    return;
  }
  std::vector<size_t> soff(n + 1, 0), roff(n + 1, 0);
  for (int r = 0; r < n; ++r) {
    soff[r + 1] = soff[r] + send_counts[r];
    roff[r + 1] = roff[r] + recv_counts[r];
  }
  if (send_counts[me] > 0) {
    kernels::cpu::copy(out + roff[me] * es, in + soff[me] * es, send_counts[me] * es);
  }
  for (int s = 1; s < n; ++s) {
    const int to = (me + s) % n;
    const int from = (me - s + n) % n;
    exchange(comm, in + soff[to] * es, send_counts[to], to, out + roff[from] * es,
             recv_counts[from], from, dtype, most);
  }
}

}  // namespace ringlet::core::collectives
