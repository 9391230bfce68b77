// Element access by dtype and the values the multi-rank tests use: small
// integers (and {-1, 1, 2} for products) so that every result is exact in
// every type, and a reference computed the same way on every rank.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ringlet/kernels/cpu.h"
#include "ringlet/types.h"

namespace ringlet::test {

inline void put(DataType t, void* base, size_t i, double v) {
  namespace cpu = kernels::cpu;
  switch (t) {
    case DataType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(base)[i] = v; break;
    case DataType::kFloat16: static_cast<uint16_t*>(base)[i] = cpu::float_to_half(static_cast<float>(v)); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(base)[i] = cpu::float_to_bfloat16(static_cast<float>(v)); break;
    case DataType::kInt8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case DataType::kUInt8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DataType::kInt16: static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v); break;
    case DataType::kUInt16: static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v); break;
  }
}

inline double get(DataType t, const void* base, size_t i) {
  namespace cpu = kernels::cpu;
  switch (t) {
    case DataType::kFloat32: return static_cast<const float*>(base)[i];
    case DataType::kFloat64: return static_cast<const double*>(base)[i];
    case DataType::kFloat16: return cpu::half_to_float(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBFloat16: return cpu::bfloat16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DataType::kInt8: return static_cast<const int8_t*>(base)[i];
    case DataType::kUInt8: return static_cast<const uint8_t*>(base)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kInt16: return static_cast<const int16_t*>(base)[i];
    case DataType::kUInt16: return static_cast<const uint16_t*>(base)[i];
  }
  return 0;
}

inline bool is_unsigned(DataType t) { return t == DataType::kUInt8 || t == DataType::kUInt16; }

// What rank `r` contributes at global element index i.
inline double value(DataType t, ReduceOp op, int r, size_t i) {
  if (op == ReduceOp::kProd) {
    if (is_unsigned(t)) return (i + r) % 2 == 0 ? 1 : 2;
    static constexpr double kProdValues[3] = {-1, 1, 2};
    return kProdValues[(i + r) % 3];
  }
  const double v = static_cast<double>((i * 7 + static_cast<size_t>(r) * 3) % 5);
  return is_unsigned(t) ? v : v - 2;
}

// acc op v, in double (an average sums; its division comes after).
inline double combine(ReduceOp op, double acc, double v) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return acc + v;
    case ReduceOp::kProd: return acc * v;
    case ReduceOp::kMin: return std::min(acc, v);
    case ReduceOp::kMax: return std::max(acc, v);
  }
  return acc;
}

inline double expected(DataType t, ReduceOp op, int n, size_t i) {
  double acc = value(t, op, 0, i);
  for (int r = 1; r < n; ++r) acc = combine(op, acc, value(t, op, r, i));
  // An average is the sum times 1/n in double, integers toward zero.
  if (op == ReduceOp::kAvg) acc = is_floating(t) ? acc / n : std::trunc(acc * (1.0 / n));
  return acc;
}

// value() and expected() repeat every kPeriod indices; the tests use these
// tables on large buffers.
inline constexpr size_t kPeriod = 30;
struct Periodic {
  double v[kPeriod];
  double operator()(size_t i) const { return v[i % kPeriod]; }
};
inline Periodic values_of(DataType t, ReduceOp op, int r) {
  Periodic p;
  for (size_t i = 0; i < kPeriod; ++i) p.v[i] = value(t, op, r, i);
  return p;
}
inline Periodic expected_of(DataType t, ReduceOp op, int n) {
  Periodic p;
  for (size_t i = 0; i < kPeriod; ++i) p.v[i] = expected(t, op, n, i);
  return p;
}

// Exact except an average in a floating type, which may be off by its rounding.
inline bool close_enough(DataType t, ReduceOp op, double got, double want) {
  if (op != ReduceOp::kAvg || !is_floating(t)) return got == want;
  double rel = t == DataType::kBFloat16 ? 1.0 / 128 : t == DataType::kFloat16 ? 1.0 / 1024
             : t == DataType::kFloat32 ? 1e-6 : 1e-14;
  return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want));
}

// A buffer of `count` elements of `t`, with guard bytes after it.
class Buffer {
 public:
  static constexpr size_t kGuard = 64;
  Buffer(DataType t, size_t count) : t_(t), count_(count), bytes_(count * dtype_size(t) + kGuard, std::byte{0x5a}) {}
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  std::byte* at(size_t i) { return bytes_.data() + i * dtype_size(t_); }
  size_t count() const { return count_; }
  double operator[](size_t i) const { return get(t_, bytes_.data(), i); }
  void set(size_t i, double v) { put(t_, bytes_.data(), i, v); }
  bool guard_intact() const {
    return std::all_of(bytes_.end() - kGuard, bytes_.end(), [](std::byte b) { return b == std::byte{0x5a}; });
  }

 private:
  DataType t_;
  size_t count_;
  std::vector<std::byte> bytes_;
};

}  // namespace ringlet::test
