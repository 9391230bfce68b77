// Test helpers for the kernels: buffers at chosen misalignments, random data
// with the awkward values mixed in, and a scalar reference for every op that is
// written independently of ringlet/kernels/ops.h (the code under test).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ringlet/kernels/cpu.h"
#include "ringlet/types.h"

namespace ringlet::kernels::test {

inline std::vector<cpu::Isa> available_isas() {
  std::vector<cpu::Isa> isas{cpu::Isa::kBaseline};
  if (cpu::best_isa() == cpu::Isa::kAvx2) isas.push_back(cpu::Isa::kAvx2);
  return isas;
}

// Pins an ISA for one test, restoring the best one afterwards.
class IsaScope {
 public:
  explicit IsaScope(cpu::Isa isa) { cpu::set_isa(isa); }
  ~IsaScope() { cpu::set_isa(cpu::best_isa()); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;
};

inline constexpr DataType kAllDtypes[] = {DataType::kFloat32, DataType::kFloat64,
                                          DataType::kFloat16, DataType::kBFloat16,
                                          DataType::kInt8,    DataType::kUInt8,
                                          DataType::kInt32,   DataType::kInt64,
                                          DataType::kInt16,   DataType::kUInt16};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                       ReduceOp::kMax, ReduceOp::kAvg};

// A byte buffer whose data() starts `misalign` bytes past a 64-byte boundary,
// so tests control alignment (0 = aligned, odd = not even element aligned).
class Buffer {
 public:
  Buffer(size_t bytes, size_t misalign) : storage_(bytes + 128), bytes_(bytes) {
    auto base = reinterpret_cast<uintptr_t>(storage_.data());
    offset_ = ((64 - base % 64) % 64) + misalign;
  }
  unsigned char* data() { return storage_.data() + offset_; }
  const unsigned char* data() const { return storage_.data() + offset_; }
  size_t size() const { return bytes_; }
  std::vector<unsigned char> bytes() const { return {data(), data() + bytes_}; }

 private:
  std::vector<unsigned char> storage_;
  size_t bytes_;
  size_t offset_;
};

// --- scalar 16-bit float references ----------------------------------------

// GCC's _Float16 (software conversions from libgcc on this target) is an
// implementation independent of ours.
inline float ref_half_to_float(uint16_t h) {
  if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
    const uint32_t u = (uint32_t(h & 0x8000) << 16) | 0x7fc00000u | (uint32_t(h & 0x3ff) << 13);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  _Float16 x;
  std::memcpy(&x, &h, 2);
  return static_cast<float>(x);
}

inline uint16_t ref_float_to_half(float f) {
  if (std::isnan(f)) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(((u >> 16) & 0x8000) | 0x7e00 | ((u >> 13) & 0x3ff));
  }
  const _Float16 x = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
}

inline float ref_bfloat16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The nearest bfloat16 by comparing distances in double (Inf counts as 2^128
// for rounding, as IEEE says), ties to the even one.
inline uint16_t ref_float_to_bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  if (std::isinf(f)) return static_cast<uint16_t>(u >> 16);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);  // toward zero
  const uint16_t hi = static_cast<uint16_t>(lo + 1);   // away from zero
  auto magnitude = [](uint16_t b) {
    if ((b & 0x7fff) == 0x7f80) return std::ldexp(1.0, 128);
    return std::fabs(static_cast<double>(ref_bfloat16_to_float(b)));
  };
  const double x = std::fabs(static_cast<double>(f));
  const double dlo = x - magnitude(lo), dhi = magnitude(hi) - x;
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

// --- scalar op references ----------------------------------------------------

template <class T>
T ref_op(ReduceOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Wrap by computing in 64 (or 128) bits and truncating.
    using Wide = std::conditional_t<sizeof(T) == 8, unsigned __int128, int64_t>;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return static_cast<T>(Wide(a) + Wide(b));
      case ReduceOp::kProd: return static_cast<T>(Wide(a) * Wide(b));
      case ReduceOp::kMin: return std::min(a, b);
      case ReduceOp::kMax: return std::max(a, b);
    }
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return a + b;
      case ReduceOp::kProd: return a * b;
      case ReduceOp::kMin:
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
        return a < b ? a : b;  // equal values (+0, -0): the second
      case ReduceOp::kMax:
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
        return a > b ? a : b;
    }
  }
  return T{};
}

// Element i of a buffer of dtype, as a double-free description: floats as
// float/double, 16-bit types widened to float, integers as themselves.
// Reference results for a whole buffer are computed per dtype by these.
template <class Fn>
void for_dtype(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat64: return fn(double{});
    case DataType::kFloat16: return fn(_Float16{});
    case DataType::kBFloat16: return fn(uint16_t{});  // bf16 bits
    case DataType::kInt8: return fn(int8_t{});
    case DataType::kUInt8: return fn(uint8_t{});
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    case DataType::kInt16: return fn(int16_t{});
    case DataType::kUInt16: return fn(uint16_t{});
  }
}

inline float widen16(DataType dtype, uint16_t v) {
  return dtype == DataType::kFloat16 ? ref_half_to_float(v) : ref_bfloat16_to_float(v);
}
inline uint16_t narrow16(DataType dtype, float f) {
  return dtype == DataType::kFloat16 ? ref_float_to_half(f) : ref_float_to_bfloat16(f);
}

// Random contents for a buffer of dtype, with NaN, +-Inf, +-0 and
// subnormals mixed in for the floating types.
inline void fill_random(DataType dtype, void* data, size_t count, std::mt19937_64& rng) {
  auto* bytes = static_cast<unsigned char*>(data);
  std::uniform_int_distribution<int> pick(0, 63);
  std::uniform_real_distribution<double> real(-100.0, 100.0);
  auto special = [&](auto t) -> decltype(t) {
    using T = decltype(t);
    const T values[] = {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN(),
                        std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min() * 3,
                        T(0), -T(0), std::numeric_limits<T>::max(), std::numeric_limits<T>::min()};
    return values[rng() % (sizeof(values) / sizeof(values[0]))];
  };
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DataType::kFloat32: {
        const float v = pick(rng) == 0 ? special(float{}) : static_cast<float>(real(rng));
        std::memcpy(bytes + 4 * i, &v, 4);
        break;
      }
      case DataType::kFloat64: {
        const double v = pick(rng) == 0 ? special(double{}) : real(rng);
        std::memcpy(bytes + 8 * i, &v, 8);
        break;
      }
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        // Mostly ordinary values; one in eight an arbitrary bit pattern, which
        // covers NaNs (signalling too), Inf and subnormals.
        uint16_t v = narrow16(dtype, static_cast<float>(real(rng)) * 0.1f);
        if (pick(rng) < 8) v = static_cast<uint16_t>(rng());
        std::memcpy(bytes + 2 * i, &v, 2);
        break;
      }
      default: {
        const uint64_t v = rng();
        std::memcpy(bytes + dtype_size(dtype) * i, &v, dtype_size(dtype));
        break;
      }
    }
  }
}

// Elementwise reference: out = a (op) b over count elements of dtype.
inline void ref_reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b,
                       size_t count) {
  for_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < count; ++i) {
      T x, y;
      std::memcpy(&x, static_cast<const char*>(a) + i * sizeof(T), sizeof(T));
      std::memcpy(&y, static_cast<const char*>(b) + i * sizeof(T), sizeof(T));
      T r;
      if constexpr (std::is_same_v<T, _Float16>) {
        uint16_t hx, hy;
        std::memcpy(&hx, &x, 2);
        std::memcpy(&hy, &y, 2);
        const uint16_t hr = narrow16(dtype, ref_op(op, widen16(dtype, hx), widen16(dtype, hy)));
        std::memcpy(&r, &hr, 2);
      } else if constexpr (std::is_same_v<T, uint16_t>) {  // bfloat16 bits, or uint16
        r = dtype == DataType::kBFloat16
                ? narrow16(dtype, ref_op(op, widen16(dtype, x), widen16(dtype, y)))
                : ref_op(op, x, y);
      } else {
        r = ref_op(op, x, y);
      }
      std::memcpy(static_cast<char*>(out) + i * sizeof(T), &r, sizeof(T));
    }
  });
}

// The reference scaling of one element (Horovod's ScaleBufferCPUImpl, with
// the range defined): floats multiply by the factor rounded to float (double
// for float64); integers multiply in double, drop the fraction (toward zero)
// and clamp, NaN giving 0.
template <class T>
T ref_scale(T x, double factor) {
  if constexpr (std::is_integral_v<T>) {
    const double v = std::trunc(static_cast<double>(x) * factor);
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, double>) {
    return x * factor;
  } else {
    return x * static_cast<float>(factor);
  }
}

inline void ref_scale_buffer(DataType dtype, void* out, const void* in, size_t n, double factor) {
  for_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < n; ++i) {
      T x;
      std::memcpy(&x, static_cast<const char*>(in) + i * sizeof(T), sizeof(T));
      T r;
      if constexpr (std::is_same_v<T, _Float16> || std::is_same_v<T, uint16_t>) {
        if (dtype == DataType::kUInt16) {  // an integer, not bfloat16 bits
          r = ref_scale(x, factor);
        } else {
          uint16_t h;
          std::memcpy(&h, &x, 2);
          const uint16_t s = narrow16(dtype, widen16(dtype, h) * static_cast<float>(factor));
          std::memcpy(&r, &s, 2);
        }
      } else {
        r = ref_scale(x, factor);
      }
      std::memcpy(static_cast<char*>(out) + i * sizeof(T), &r, sizeof(T));
    }
  });
}

// reduce_many's reference: a left fold of the inputs in order; native types
// round at every step, fp16/bf16 fold in float and round once at the end
// (the contract in ringlet/kernels/cpu.h).
inline void ref_reduce_many(DataType dtype, ReduceOp op, void* out,
                            const std::vector<const void*>& inputs, size_t count) {
  const size_t size = dtype_size(dtype);
  if (dtype != DataType::kFloat16 && dtype != DataType::kBFloat16) {
    std::vector<unsigned char> acc(count * size);
    std::memcpy(acc.data(), inputs[0], count * size);
    for (size_t j = 1; j < inputs.size(); ++j) {
      ref_reduce(dtype, op, acc.data(), acc.data(), inputs[j], count);
    }
    std::memcpy(out, acc.data(), count * size);
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    auto at = [&](size_t j) {
      uint16_t v;
      std::memcpy(&v, static_cast<const unsigned char*>(inputs[j]) + 2 * i, 2);
      return widen16(dtype, v);
    };
    float acc = at(0);
    for (size_t j = 1; j < inputs.size(); ++j) acc = ref_op(op, acc, at(j));
    const uint16_t r = narrow16(dtype, acc);
    std::memcpy(static_cast<unsigned char*>(out) + 2 * i, &r, 2);
  }
}

// The reference of a reduction's last step: Horovod runs an average as a sum
// whose postscale it divides by the ranks (in double), then scales the result
// once, where that factor is not 1.0.
inline void ref_finish(DataType dtype, ReduceOp op, void* out, const void* in, size_t count,
                       int ranks, double postscale) {
  const double factor = op == ReduceOp::kAvg ? postscale / ranks : postscale;
  if (factor == 1.0) {
    std::memcpy(out, in, count * dtype_size(dtype));
  } else {
    ref_scale_buffer(dtype, out, in, count, factor);
  }
}

// Compares two buffers of dtype: bit-exact, except that any NaN matches any
// NaN (payloads are not part of the reduce contract). Reports the first few
// differences.
inline ::testing::AssertionResult same_values(DataType dtype, const void* expected,
                                              const void* actual, size_t count) {
  const size_t size = dtype_size(dtype);
  size_t mismatches = 0;
  std::string report;
  for (size_t i = 0; i < count; ++i) {
    const auto* e = static_cast<const unsigned char*>(expected) + i * size;
    const auto* a = static_cast<const unsigned char*>(actual) + i * size;
    if (std::memcmp(e, a, size) == 0) continue;
    bool both_nan = false;
    if (dtype == DataType::kFloat32) {
      float x, y;
      std::memcpy(&x, e, 4);
      std::memcpy(&y, a, 4);
      both_nan = std::isnan(x) && std::isnan(y);
    } else if (dtype == DataType::kFloat64) {
      double x, y;
      std::memcpy(&x, e, 8);
      std::memcpy(&y, a, 8);
      both_nan = std::isnan(x) && std::isnan(y);
    } else if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) {
      uint16_t x, y;
      std::memcpy(&x, e, 2);
      std::memcpy(&y, a, 2);
      both_nan = std::isnan(widen16(dtype, x)) && std::isnan(widen16(dtype, y));
    }
    if (both_nan) continue;
    if (++mismatches <= 5) {
      char line[160];
      uint64_t ev = 0, av = 0;
      std::memcpy(&ev, e, size);
      std::memcpy(&av, a, size);
      std::snprintf(line, sizeof(line), "\n  [%zu] expected bits 0x%llx, got 0x%llx", i,
                    static_cast<unsigned long long>(ev), static_cast<unsigned long long>(av));
      report += line;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " of " << count << " elements differ ("
                                       << to_string(dtype) << ")" << report;
}

}  // namespace ringlet::kernels::test
