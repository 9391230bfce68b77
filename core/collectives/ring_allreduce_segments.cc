// Ring allreduce of several tensors (allreduce_segments across hosts, or with
// RINGLET_ALGORITHM=ring): the ring moves one contiguous buffer, so the
// tensors are staged through the fusion buffer in pieces of fusion_piece_bytes
// (fused_pieces.h; whole-message packing took 2.3x as long for 16 MiB of
// 64 KiB tensors at np=2). The result's one scale (the postscale, with an
// average's 1/size) is the ring's: each block's owner applies it at the
// reduce-scatter's last step, so the unpack is a plain copy.
//
// Phases: MEMCPY_IN_FUSION_BUFFER, RING_REDUCESCATTER, RING_ALLGATHER,
// MEMCPY_OUT_FUSION_BUFFER per piece, on the piece's tensors; PRESCALE before
// a lone prescaled tensor.
#include <algorithm>

#include "core/collectives/algorithms.h"
#include "core/collectives/fused_pieces.h"
#include "core/collectives/workspace.h"

namespace ringlet::core::collectives {

void ring_allreduce_segments(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                             double postscale) {
  Workspace& ws = comm.workspace();
  const size_t piece = std::max<size_t>(1, ws.tuning.fusion_piece_bytes / s.es);
  allreduce_in_pieces(ws, s, prescale, piece,
                      [&](const void* src, void* data, size_t n, size_t first, size_t end) {
                        ring_allreduce(comm, src, data, n, s.dtype, op, postscale, first, end);
                      });
}

}  // namespace ringlet::core::collectives
