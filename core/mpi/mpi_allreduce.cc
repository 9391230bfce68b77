// Allreduce through MPI (HOROVOD_CPU_OPERATIONS=MPI): MPI_Allreduce on the
// set's MPI communicator, whose algorithm MPI picks by size, as Horovod's MPI
// allreduce runs it. Phases:
//   one tensor      PRESCALE (the scaled input written to the output, where the
//                   prescale is not 1), then MPI_ALLREDUCE: from the input into
//                   the output (in place where they are one buffer), and the
//                   result's one factor applied to the output;
//   several tensors MEMCPY_IN_FUSION_BUFFER (packed back to back with the
//                   prescale), MPI_ALLREDUCE in place on the fusion buffer,
//                   MEMCPY_OUT_FUSION_BUFFER (unpacked with the result's factor).
// The whole message is one call, cut only where it passes MPI's int counts:
// MPI pipelines inside its own algorithms, and each extra call would add its
// latency. Scaling follows kernels::ops (result_scale), so integers and
// minima/maxima come out bit for bit as on the ring.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/mpi/mpi_call.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::collectives {

namespace {

// recv = op over ranks of send (send may be MPI_IN_PLACE), in pieces of at
// most mpi_max_count elements.
void allreduce_pieces(Communicator& comm, const void* send, void* recv, size_t count,
                      DataType dtype, ReduceOp op) {
  const MPI_Comm c = mpi_comm_of(comm);
  const MPI_Datatype type = mpi_datatype(dtype);
  const MPI_Op mop = mpi_reduce_op(dtype, op);
  const size_t es = dtype_size(dtype);
  const size_t most = mpi_max_count(comm);
  for (size_t at = 0; at < count; at += most) {
    const int n = static_cast<int>(std::min(most, count - at));
    void* out = static_cast<std::byte*>(recv) + at * es;
    const void* in =
        send == MPI_IN_PLACE ? MPI_IN_PLACE : static_cast<const std::byte*>(send) + at * es;
    mpi_call(comm, "MPI_Allreduce", [&] { return MPI_Allreduce(in, out, n, type, mop, c); });
  }
}

}  // namespace

void mpi_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                   double postscale) {
  Workspace& ws = comm.workspace();
  const double factor = kernels::ops::result_scale(op, postscale, comm.size());
  if (s.in.size() == 1) {
    const void* send = s.in[0].data;
    void* recv = s.out[0].data;
    PhaseScope phase(ws, prescale != 1.0 ? "PRESCALE" : "MPI_ALLREDUCE");
    if (prescale != 1.0) {
      kernels::cpu::pack(s.dtype, recv, s.in, prescale);
      send = recv;
      phase.next("MPI_ALLREDUCE");
    }
    allreduce_pieces(comm, send == recv ? MPI_IN_PLACE : send, recv, s.total, s.dtype, op);
    kernels::cpu::scale(s.dtype, recv, s.total, factor);
    return;
  }
  ws.fusion_buffer.resize(std::max(ws.fusion_buffer.size(), s.total * s.es));
  std::byte* fused = ws.fusion_buffer.data();
  PhaseScope phase(ws, "MEMCPY_IN_FUSION_BUFFER");
  kernels::cpu::pack(s.dtype, fused, s.in, prescale);
  phase.next("MPI_ALLREDUCE");
  allreduce_pieces(comm, MPI_IN_PLACE, fused, s.total, s.dtype, op);
  phase.next("MEMCPY_OUT_FUSION_BUFFER");
  kernels::cpu::unpack(s.dtype, fused, s.out, factor);
}

}  // namespace ringlet::core::collectives
