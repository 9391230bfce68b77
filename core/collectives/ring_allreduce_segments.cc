// Ring allreduce of several tensors (allreduce_segments across hosts, or with
// RINGLET_ALGORITHM=ring): the ring moves one contiguous buffer, so the
// tensors are packed into the fusion buffer (prescale on the way), reduced
// (and scaled), and unpacked, in pieces of fusion_piece_bytes so
// that a piece stays in the cache from pack to unpack (packing the whole
// message first sent every byte through memory three more times: 16 MiB of
// 64 KiB tensors at np=2 took 2.3x as long). The result's one scale (the
// postscale, with an average's 1/size) is the ring's: each block's owner
// applies it at the reduce-scatter's last step, so the unpack is a plain
// copy. One tensor needs no buffer: it is prescaled into its output and
// reduced there in one call.
//
// Phases: MEMCPY_IN_FUSION_BUFFER, RING_REDUCESCATTER, RING_ALLGATHER,
// MEMCPY_OUT_FUSION_BUFFER per piece, on the piece's tensors; PRESCALE before
// a lone prescaled tensor.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/collectives/workspace.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::collectives {

void ring_allreduce_segments(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                             double postscale) {
  namespace cpu = kernels::cpu;
  Workspace& ws = comm.workspace();
  const DataType dtype = s.dtype;
  const size_t es = s.es;
  const size_t lone = s.tensor_at(0);
  if (s.start[lone + 1] == s.total) {  // one non-empty tensor
    const void* src = s.in[lone].data;
    void* out = s.out[lone].data;
    if (prescale != 1.0) {
      PhaseScope phase(ws, "PRESCALE", lone, lone + 1);
      cpu::pack(dtype, out, {&s.in[lone], 1}, prescale);
      src = out;
    }
    ring_allreduce(comm, src, out, s.total, dtype, op, postscale, lone, lone + 1);
    return;
  }

  const size_t piece = std::max<size_t>(1, ws.tuning.fusion_piece_bytes / es);
  const size_t buffer_bytes = std::min(s.total, piece) * es;
  if (ws.fusion_buffer.size() < buffer_bytes) ws.fusion_buffer.resize(buffer_bytes);  // once
  std::byte* fused = ws.fusion_buffer.data();
  for (size_t lo = 0; lo < s.total; lo += piece) {
    const size_t n = std::min(piece, s.total - lo);
    size_t first, end;
    s.tensors_of(lo, n, first, end);
    {
      PhaseScope phase(ws, "MEMCPY_IN_FUSION_BUFFER", first, end);
      s.read(fused, lo, n, prescale, cpu::Store::kNormal);
    }
    ring_allreduce(comm, fused, fused, n, dtype, op, postscale, first, end);
    PhaseScope phase(ws, "MEMCPY_OUT_FUSION_BUFFER", first, end);
    s.write(fused, lo, n, cpu::Store::kNormal);
  }
}

}  // namespace ringlet::core::collectives
