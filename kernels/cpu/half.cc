// The public float <-> fp16/bf16 conversions: scalar ones straight from the
// shared bit-exact definitions, block ones through the dispatched loops (F16C
// where the CPU has it).
#include "isa_loops.h"

namespace ringlet::kernels::cpu {

uint16_t float_to_half(float f) { return bits::float_to_half(f); }
float half_to_float(uint16_t h) { return bits::half_to_float(h); }
uint16_t float_to_bfloat16(float f) { return bits::float_to_bfloat16(f); }
float bfloat16_to_float(uint16_t b) { return bits::bfloat16_to_float(b); }

void float_to_half(uint16_t* out, const float* in, size_t count) {
  if (detail::use_avx2()) {
    avx2::float_to_half_block(out, in, count);
  } else {
    base::float_to_half_block(out, in, count);
  }
}

void half_to_float(float* out, const uint16_t* in, size_t count) {
  if (detail::use_avx2()) {
    avx2::half_to_float_block(out, in, count);
  } else {
    base::half_to_float_block(out, in, count);
  }
}

void float_to_bfloat16(uint16_t* out, const float* in, size_t count) {
  if (detail::use_avx2()) {
    avx2::float_to_bfloat16_block(out, in, count);
  } else {
    base::float_to_bfloat16_block(out, in, count);
  }
}

void bfloat16_to_float(float* out, const uint16_t* in, size_t count) {
  if (detail::use_avx2()) {
    avx2::bfloat16_to_float_block(out, in, count);
  } else {
    base::bfloat16_to_float_block(out, in, count);
  }
}

}  // namespace ringlet::kernels::cpu
