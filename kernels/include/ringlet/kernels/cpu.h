// Element-wise work on host buffers: the only host code that touches elements.
// Every function takes counts in elements, never bytes, and accepts count 0.
// Buffers may be unaligned; `out` may alias one of the inputs exactly (in place)
// but must not partially overlap it.
#pragma once

#include <cstddef>
#include <span>

#include "ringlet/types.h"

namespace ringlet::kernels::cpu {

// How results are written. kStream uses non-temporal stores: faster once the
// written data is past the last-level cache and is read next by another core.
enum class Store { kNormal, kStream };

// out[i] = a[i] (op) b[i]. kAvg reduces as kSum (see finish_average).
void reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count,
            Store store = Store::kNormal);

// out[i] = inputs[0][i] (op) inputs[1][i] (op) ... in input order, reading each
// input once and writing out once. inputs.size() >= 1. kAvg reduces as kSum.
void reduce_many(DataType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                 size_t count, Store store = Store::kNormal);

// buf[i] *= factor (integers: rounded to nearest, saturating to the type's range).
void scale(DataType dtype, void* buf, size_t count, double factor);

// Turns a sum over `contributors` ranks into their average: floats x 1/n,
// integers divided by n (toward zero).
void finish_average(DataType dtype, void* buf, size_t count, int contributors);

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

// Plain copy with the chosen store kind (bytes, not elements).
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
