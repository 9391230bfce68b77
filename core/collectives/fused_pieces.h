// An allreduce of several tensors through an algorithm that reduces one
// contiguous buffer in place (the ring, the hierarchical steps): the tensors
// go through the fusion buffer in pieces of `piece` elements, so that a piece
// stays in the cache from pack to unpack (packing the whole message first
// sent every byte through memory three more times), prescaled on the way in;
// the unpack is a plain copy, the result's one scale being the algorithm's.
// One non-empty tensor needs no buffer: it is prescaled into its output and
// reduced there in one call.
//
// reduce(src, data, n, first, end) reduces n elements of `data` in place,
// reading the input from `src` (data itself, or the caller's input where it
// is not the output); [first, end) are the tensors of the piece, for the
// timeline's phases.
//
// Phases: MEMCPY_IN_FUSION_BUFFER and MEMCPY_OUT_FUSION_BUFFER around each
// piece's own; PRESCALE before a lone prescaled tensor.
#pragma once

#include <algorithm>
#include <cstddef>

#include "core/collectives/segments.h"
#include "core/collectives/workspace.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::collectives {

template <class Reduce>
void allreduce_in_pieces(Workspace& ws, const Segments& s, double prescale, size_t piece,
                         Reduce&& reduce) {
  namespace cpu = kernels::cpu;
  const size_t lone = s.tensor_at(0);
  if (s.start[lone + 1] == s.total) {  // one non-empty tensor
    const void* src = s.in[lone].data;
    auto* out = static_cast<std::byte*>(s.out[lone].data);
    if (prescale != 1.0) {
      PhaseScope phase(ws, "PRESCALE", lone, lone + 1);
      cpu::pack(s.dtype, out, {&s.in[lone], 1}, prescale);
      src = out;
    }
    reduce(src, out, s.total, lone, lone + 1);
    return;
  }
  const size_t buffer_bytes = std::min(s.total, piece) * s.es;
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
    reduce(fused, fused, n, first, end);
    PhaseScope phase(ws, "MEMCPY_OUT_FUSION_BUFFER", first, end);
    s.write(fused, lo, n, cpu::Store::kNormal);
  }
}

}  // namespace ringlet::core::collectives
