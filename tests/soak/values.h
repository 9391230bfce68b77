// The soak's element values: every rank derives every rank's input from
// (collective seed, rank, element index), so each rank can compute what every
// collective must return without asking anyone. Values are small integers in
// a range chosen per dtype and op so that sums, products, pre/postscales by
// powers of two and min/max are exact in every dtype (bfloat16 holds the
// integers up to 256 exactly, float16 up to 2048): only averages round.
//
// The 16-bit float codecs are written here in plain scalar code, apart from
// the library's kernels, so that the reference shares nothing with what it
// checks.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ringlet/types.h"

namespace soak {

using ringlet::DataType;
using ringlet::ReduceOp;

// splitmix64: a cheap, well-mixed hash; the same on every rank and build.
constexpr uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Range {
  int64_t lo;
  int64_t hi;
};

// Bounds keep every result exact with up to 4 contributors, a prescale and a
// postscale of 2 each (8-bit integers are never scaled, see plan.cc).
inline Range value_range(DataType t, ReduceOp op) {
  if (op == ReduceOp::kProd) {
    return t == DataType::kUInt8 || t == DataType::kUInt16 ? Range{0, 3} : Range{-2, 2};
  }
  switch (t) {
    case DataType::kInt8: return {-7, 7};
    case DataType::kUInt8: return {0, 15};
    case DataType::kInt16: return {-1000, 1000};
    case DataType::kUInt16: return {0, 2000};
    case DataType::kBFloat16: return {-16, 16};
    case DataType::kFloat16: return {-100, 100};
    case DataType::kFloat32: return {-(int64_t{1} << 16), int64_t{1} << 16};
    case DataType::kInt32: return {-(int64_t{1} << 20), int64_t{1} << 20};
    case DataType::kFloat64:
    case DataType::kInt64: return {-(int64_t{1} << 40), int64_t{1} << 40};
  }
  return {0, 0};
}

// The value rank `rank` holds at `index` of the collective drawn with `seed`.
inline int64_t input_value(uint64_t seed, int rank, uint64_t index, Range r) {
  const uint64_t h = mix(seed ^ (static_cast<uint64_t>(rank) << 56 | index));
  // The high half of h * span: uniform enough, and no division per element.
  const auto span = static_cast<unsigned __int128>(r.hi - r.lo + 1);
  return r.lo + static_cast<int64_t>((h * span) >> 64);
}

// IEEE binary16 and bfloat16 from and to double. Encoding rounds to nearest
// even; the inputs are small integers, exact in both.
inline double half_to_double(uint16_t h) {
  const int sign = h >> 15;
  const int exp = (h >> 10) & 0x1f;
  const int frac = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(frac, -24);
  } else if (exp == 31) {
    v = frac ? NAN : INFINITY;
  } else {
    v = std::ldexp(frac + 1024, exp - 25);
  }
  return sign ? -v : v;
}

inline uint16_t double_to_half(double d) {
  const uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  double a = std::fabs(d);
  if (std::isnan(d)) return 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) {  // subnormal: units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const double units = std::nearbyint(std::ldexp(a, 11 - e));  // 11 significant bits
  uint32_t bits = static_cast<uint32_t>(e + 14) << 10;         // biased exponent of 2^(e-1)
  bits += static_cast<uint32_t>(units) - 1024;  // a carry into the exponent is still right
  return static_cast<uint16_t>(sign | bits);
}

inline double bf16_to_double(uint16_t b) {
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(b) << 16));
}

inline uint16_t double_to_bf16(double d) {
  const uint32_t f = std::bit_cast<uint32_t>(static_cast<float>(d));
  if (std::isnan(d)) return 0x7fc0;
  const uint32_t rounding = 0x7fff + ((f >> 16) & 1);
  return static_cast<uint16_t>((f + rounding) >> 16);
}

// Element i of a buffer of dtype t, as a double (integers up to 2^53 exactly,
// which the ranges above respect).
inline double load(DataType t, const void* p, size_t i) {
  switch (t) {
    case DataType::kFloat32: return static_cast<const float*>(p)[i];
    case DataType::kFloat64: return static_cast<const double*>(p)[i];
    case DataType::kFloat16: return half_to_double(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBFloat16: return bf16_to_double(static_cast<const uint16_t*>(p)[i]);
    case DataType::kInt8: return static_cast<const int8_t*>(p)[i];
    case DataType::kUInt8: return static_cast<const uint8_t*>(p)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DataType::kInt16: return static_cast<const int16_t*>(p)[i];
    case DataType::kUInt16: return static_cast<const uint16_t*>(p)[i];
  }
  return 0;
}

inline void store(DataType t, void* p, size_t i, double v) {
  switch (t) {
    case DataType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DataType::kFloat64: static_cast<double*>(p)[i] = v; return;
    case DataType::kFloat16: static_cast<uint16_t*>(p)[i] = double_to_half(v); return;
    case DataType::kBFloat16: static_cast<uint16_t*>(p)[i] = double_to_bf16(v); return;
    case DataType::kInt8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DataType::kUInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DataType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DataType::kInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); return;
    case DataType::kInt16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); return;
    case DataType::kUInt16: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); return;
  }
}

// The relative precision of a dtype: half the distance from 1 to the next value.
inline double unit_roundoff(DataType t) {
  switch (t) {
    case DataType::kFloat16: return std::ldexp(1.0, -11);
    case DataType::kBFloat16: return std::ldexp(1.0, -8);
    case DataType::kFloat32: return std::ldexp(1.0, -24);
    case DataType::kFloat64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}

}  // namespace soak
