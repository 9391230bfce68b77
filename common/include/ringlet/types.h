// Element types and reduction operators: the vocabulary shared by the kernels,
// the runtime and the public API. Public header, installed with ringlet.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ringlet {

// Values are part of the C ABI (ringlet_c.h mirrors them); append only.
enum class DataType : int32_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kInt8 = 4,
  kUInt8 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kInt16 = 8,
  kUInt16 = 9,
};
inline constexpr int kNumDataTypes = 10;

// kAvg is a sum whose result is multiplied by postscale / n (n contributors),
// once: floats in their compute type, integers in double and then toward zero
// (ringlet/kernels/ops.h, result_scale), as Horovod averages. For integers
// that is trunc(sum * (1.0 / n)) with the default postscale, not the exact
// quotient sum / n: they differ where n * (1.0 / n) falls short of 1 in
// double, which for n <= 128 is n = 49, 98, 103 and 107 (49 ranks averaging
// a 1 each get 0). Every path (host, device, synchronous, asynchronous)
// follows this one rule.
enum class ReduceOp : int32_t {
  kSum = 0,
  kProd = 1,
  kMin = 2,
  kMax = 3,
  kAvg = 4,
};
inline constexpr int kNumReduceOps = 5;

constexpr size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt8: return 1;
    case DataType::kUInt8: return 1;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kInt16: return 2;
    case DataType::kUInt16: return 2;
  }
  return 0;
}

constexpr bool is_floating(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

constexpr bool is_valid(DataType t) {
  return static_cast<int32_t>(t) >= 0 && static_cast<int32_t>(t) < kNumDataTypes;
}
constexpr bool is_valid(ReduceOp op) {
  return static_cast<int32_t>(op) >= 0 && static_cast<int32_t>(op) < kNumReduceOps;
}

// nccl-tests' spellings: float, double, half, bfloat16, int8, uint8, int32, int64
// (and int16, uint16, which nccl-tests lacks).
constexpr std::string_view to_string(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kFloat16: return "half";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt8: return "int8";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kInt16: return "int16";
    case DataType::kUInt16: return "uint16";
  }
  return "unknown";
}

constexpr std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "unknown";
}

constexpr std::optional<DataType> parse_dtype(std::string_view s) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    auto t = static_cast<DataType>(i);
    if (to_string(t) == s) return t;
  }
  if (s == "float32") return DataType::kFloat32;
  if (s == "float64") return DataType::kFloat64;
  if (s == "float16") return DataType::kFloat16;
  return std::nullopt;
}

constexpr std::optional<ReduceOp> parse_op(std::string_view s) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    auto op = static_cast<ReduceOp>(i);
    if (to_string(op) == s) return op;
  }
  return std::nullopt;
}

}  // namespace ringlet
