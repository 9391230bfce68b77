// Bit-exact scalar conversions between float and the 16-bit float formats
// (IEEE binary16 "half" and bfloat16), shared by host and device code. They are
// the reference that the vectorized paths (F16C on the CPU, the __half and
// __nv_bfloat16 intrinsics on the GPU) must match bit for bit.
//
// float -> 16 bit: round to nearest, ties to even; values past the largest
// finite half round to Inf; NaN stays NaN, quieted, keeping the top payload bits
// (what x86 F16C and the CUDA intrinsics do). 16 bit -> float: exact; a
// signalling half NaN comes back quiet (as F16C does); bfloat16 is the top half
// of a float, so it widens by a shift.
#pragma once

#include <cstdint>

#include "ringlet/kernels/ops.h"  // RINGLET_HD

namespace ringlet::kernels::bits {

RINGLET_HD uint32_t float_as_u32(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return __builtin_bit_cast(uint32_t, f);
#endif
}
RINGLET_HD float u32_as_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return __builtin_bit_cast(float, u);
#endif
}

RINGLET_HD float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) {  // Inf, or NaN made quiet
    return u32_as_float(sign | 0x7f800000u | (man != 0 ? (0x400000u | (man << 13)) : 0u));
  }
  if (exp == 0) {
    if (man == 0) return u32_as_float(sign);
    // Subnormal: man x 2^-24, exact in float (and a normal float, so no
    // flush-to-zero mode can touch it).
    return u32_as_float(sign | float_as_u32(static_cast<float>(man) * 0x1p-24f));
  }
  // Rebias the exponent from 15 to 127.
  return u32_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

RINGLET_HD uint16_t float_to_half(float f) {
  const uint32_t u = float_as_u32(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {  // NaN: quiet, top 9 payload bits kept
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  // 65520 (0x477ff000) is halfway between 65504, the largest half, and 65536;
  // the tie goes to the even neighbour, which is Inf.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u) {  // >= 2^-14: a normal half
    uint32_t r = a - (112u << 23);        // rebias 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);       // round the 13 dropped bits, ties to even
    return static_cast<uint16_t>(sign | (r >> 13));  // a carry into the exponent is right
  }
  // 2^-25 is halfway between 0 and the smallest subnormal: ties to even is 0.
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);
  // Subnormal half: value in units of 2^-24 = mantissa >> (126 - exp).
  const uint32_t exp = a >> 23;
  const uint32_t man = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // 14..24
  uint32_t r = man >> shift;
  const uint32_t rem = man & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;  // may become 0x400, the smallest normal
  return static_cast<uint16_t>(sign | r);
}

RINGLET_HD float bfloat16_to_float(uint16_t b) {
  return u32_as_float(static_cast<uint32_t>(b) << 16);
}

RINGLET_HD uint16_t float_to_bfloat16(float f) {
  const uint32_t u = float_as_u32(f);
  // Written without branches so that loops over it vectorize.
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // overflow rounds to Inf
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

}  // namespace ringlet::kernels::bits
