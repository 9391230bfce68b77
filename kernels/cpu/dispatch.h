// Private to kernels/cpu: turning the run-time (dtype, op, ISA) of a call into
// the compile-time types the loops are instantiated for.
#pragma once

#include <cstdint>

#include "ringlet/kernels/cpu.h"
#include "ringlet/kernels/ops.h"
#include "ringlet/types.h"

namespace ringlet::kernels::cpu::detail {

// One relaxed atomic load and a predictable branch per kernel call.
bool use_avx2();

[[noreturn]] void bad_argument(const char* what, long long value);

// Element kinds. Native types compute in themselves; the 16-bit floats are
// stored as raw bits and computed in float.
template <class T>
struct Native {
  using Storage = T;
  using Compute = T;
  static constexpr bool kIs16 = false;
};
struct Half {
  using Storage = uint16_t;
  using Compute = float;
  static constexpr bool kIs16 = true;
};
struct BFloat16 {
  using Storage = uint16_t;
  using Compute = float;
  static constexpr bool kIs16 = true;
};

template <class Fn>
decltype(auto) visit_dtype(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: return fn(Native<float>{});
    case DataType::kFloat64: return fn(Native<double>{});
    case DataType::kFloat16: return fn(Half{});
    case DataType::kBFloat16: return fn(BFloat16{});
    case DataType::kInt8: return fn(Native<int8_t>{});
    case DataType::kUInt8: return fn(Native<uint8_t>{});
    case DataType::kInt32: return fn(Native<int32_t>{});
    case DataType::kInt64: return fn(Native<int64_t>{});
    case DataType::kInt16: return fn(Native<int16_t>{});
    case DataType::kUInt16: return fn(Native<uint16_t>{});
  }
  bad_argument("dtype", static_cast<long long>(dtype));
}

// An op as a type, so that it can be passed through a generic lambda.
template <template <class> class Op>
struct OpTag {
  template <class T>
  using Fn = Op<T>;
};

// kAvg reduces as kSum; its 1/n is part of the result's scale.
template <class Fn>
decltype(auto) visit_op(ReduceOp op, Fn&& fn) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return fn(OpTag<ops::Sum>{});
    case ReduceOp::kProd: return fn(OpTag<ops::Prod>{});
    case ReduceOp::kMin: return fn(OpTag<ops::Min>{});
    case ReduceOp::kMax: return fn(OpTag<ops::Max>{});
  }
  bad_argument("reduce op", static_cast<long long>(op));
}

}  // namespace ringlet::kernels::cpu::detail
