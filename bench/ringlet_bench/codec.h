// Reading and writing one element of any dtype as a double. The checker keeps
// its own half and bfloat16 conversions instead of the kernels' so that a bug
// there cannot hide the same bug in the results it checks.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ringlet/types.h"

namespace ringlet::bench {

inline uint16_t half_from_double(double d) {
  const uint32_t x = std::bit_cast<uint32_t>(static_cast<float>(d));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t biased = static_cast<int32_t>((x >> 23) & 0xffu);
  uint32_t mant = x & 0x7fffffu;
  if (biased == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int32_t exp = biased - 127 + 15;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {  // a half subnormal, or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rounds into the exponent
  return static_cast<uint16_t>(h);
}

inline double half_to_double(uint16_t h) {
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + mant, exp - 25);
}

inline uint16_t bf16_from_double(double d) {
  uint32_t x = std::bit_cast<uint32_t>(static_cast<float>(d));
  if (std::isnan(static_cast<float>(d))) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

inline double bf16_to_double(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline void store(DataType t, void* buf, size_t i, double v) {
  switch (t) {
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); return;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = v; return;
    case DataType::kFloat16: static_cast<uint16_t*>(buf)[i] = half_from_double(v); return;
    case DataType::kBFloat16: static_cast<uint16_t*>(buf)[i] = bf16_from_double(v); return;
    case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); return;
    case DataType::kUInt8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); return;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); return;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); return;
    case DataType::kInt16: static_cast<int16_t*>(buf)[i] = static_cast<int16_t>(v); return;
    case DataType::kUInt16: static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(v); return;
  }
}

inline double load(DataType t, const void* buf, size_t i) {
  switch (t) {
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
    case DataType::kFloat16: return half_to_double(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBFloat16: return bf16_to_double(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kInt8: return static_cast<const int8_t*>(buf)[i];
    case DataType::kUInt8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kInt16: return static_cast<const int16_t*>(buf)[i];
    case DataType::kUInt16: return static_cast<const uint16_t*>(buf)[i];
  }
  return NAN;
}

}  // namespace ringlet::bench
