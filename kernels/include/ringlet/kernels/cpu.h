// Element-wise work on host buffers: the only host code that touches elements.
// Every function takes counts in elements, never bytes, and accepts count 0.
// Buffers may be unaligned; `out` may alias one of the inputs exactly (in place)
// but must not partially overlap it.
//
// The arithmetic of each op is defined once in ops.h (shared with the CUDA
// kernels): integer sum/prod wrap; float min/max propagate NaN; fp16/bf16 are
// computed in float and rounded back to nearest-even; scale truncates integers
// toward zero. An invalid dtype, op or input count throws an invalid-argument
// common::Failure (a caller's bug, never data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "ringlet/types.h"

namespace ringlet::kernels::cpu {

// How results are written. kStream uses non-temporal stores and ends with a
// store fence (the data is visible to other cores before anything the caller
// writes after the call): faster once the written data is past the last-level
// cache and is read next by another core. On this machine (32 MiB L3) it wins
// from ~16 MiB up and loses clearly at 2 MiB and below; the caller chooses.
enum class Store { kNormal, kStream };

// Instruction sets the kernels are compiled for; the best one the CPU supports
// is picked at first use. kAvx2 means AVX2 + F16C.
enum class Isa { kBaseline, kAvx2 };
Isa best_isa();
Isa active_isa();
// Tests and benchmarks pin an ISA to compare paths; asking for more than the
// CPU has gives best_isa(). Not for use while kernels run on other threads.
void set_isa(Isa isa);
std::string_view to_string(Isa isa);

// out[i] = a[i] (op) b[i]. kAvg reduces as kSum: its 1/n is part of the
// factor the result is scaled by (ops::result_scale).
void reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count,
            Store store = Store::kNormal);

// out[i] = inputs[0][i] (op) inputs[1][i] (op) ... in input order, reading each
// input once and writing out once. inputs.size() >= 1. kAvg reduces as kSum.
// out may alias any one input exactly. fp16/bf16 accumulate in float and round
// once at the end, so for more than two inputs the result can differ from a
// chain of reduce() calls (it is the more accurate of the two).
void reduce_many(DataType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                 size_t count, Store store = Store::kNormal);

// buf[i] *= factor (integers: in double, then toward zero, saturating to the
// type's range; floats: in float, or double for float64, see ops.h). A factor
// of 1.0 leaves buf untouched. An average's result is the sum scaled by
// ops::result_scale(kAvg, postscale, n).
void scale(DataType dtype, void* buf, size_t count, double factor);

// One tensor inside a fusion buffer.
struct Segment {
  void* data;    // the tensor's own memory
  size_t count;  // elements
};
struct ConstSegment {
  const void* data;
  size_t count;
};

// Copies the tensors back to back into `fused`, multiplying by `factor` on the
// way (1.0 copies exactly). Returns the elements written.
size_t pack(DataType dtype, void* fused, std::span<const ConstSegment> tensors, double factor = 1.0);
// The inverse of pack.
size_t unpack(DataType dtype, const void* fused, std::span<const Segment> tensors,
              double factor = 1.0);

// Plain copy with the chosen store kind (bytes, not elements). dst and src must
// not overlap.
void copy(void* dst, const void* src, size_t bytes, Store store = Store::kNormal);

// Conversions, round-to-nearest-even; NaN stays NaN, overflow goes to Inf.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);
float bfloat16_to_float(uint16_t b);
void float_to_half(uint16_t* out, const float* in, size_t count);
void half_to_float(float* out, const uint16_t* in, size_t count);
void float_to_bfloat16(uint16_t* out, const float* in, size_t count);
void bfloat16_to_float(float* out, const uint16_t* in, size_t count);

}  // namespace ringlet::kernels::cpu
