// Private to kernels/cuda: how each DataType is stored on the device and
// computed in, and the host-side switch from run-time (dtype, op) to kernel
// template arguments. The arithmetic itself is ops.h's, shared with the CPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ringlet/kernels/ops.h"
#include "ringlet/types.h"

namespace ringlet::kernels::cuda::detail {

// Storage type S -> compute type, and the conversions between them. fp16 and
// bf16 widen exactly and narrow with round-to-nearest-even (the _rn
// intrinsics), the rounding that half_bits.h spells out for the CPU.
template <class S>
struct Element {
  using Compute = S;
  static __device__ __forceinline__ S widen(S x) { return x; }
  static __device__ __forceinline__ S narrow(S x) { return x; }
};
template <>
struct Element<__half> {
  using Compute = float;
  static __device__ __forceinline__ float widen(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half narrow(float x) { return __float2half_rn(x); }
};
template <>
struct Element<__nv_bfloat16> {
  using Compute = float;
  static __device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 narrow(float x) { return __float2bfloat16_rn(x); }
};

// The raw 16 bits of a 16-bit float.
__device__ __forceinline__ uint16_t raw_bits(__half x) { return __half_as_ushort(x); }
__device__ __forceinline__ uint16_t raw_bits(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
template <class S>
__device__ __forceinline__ S from_raw_bits(uint16_t b) {
  if constexpr (std::is_same_v<S, __half>) {
    return __ushort_as_half(b);
  } else {
    return __ushort_as_bfloat16(b);
  }
}

template <class T>
struct Tag {
  using Type = T;
};

// Calls fn(Tag<S>{}) for the dtype's storage type; cudaErrorInvalidValue for
// an unknown dtype.
template <class Fn>
cudaError_t visit_dtype(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: return fn(Tag<float>{});
    case DataType::kFloat64: return fn(Tag<double>{});
    case DataType::kFloat16: return fn(Tag<__half>{});
    case DataType::kBFloat16: return fn(Tag<__nv_bfloat16>{});
    case DataType::kInt8: return fn(Tag<int8_t>{});
    case DataType::kUInt8: return fn(Tag<uint8_t>{});
    case DataType::kInt32: return fn(Tag<int32_t>{});
    case DataType::kInt64: return fn(Tag<int64_t>{});
    case DataType::kInt16: return fn(Tag<int16_t>{});
    case DataType::kUInt16: return fn(Tag<uint16_t>{});
  }
  return cudaErrorInvalidValue;
}

template <template <class> class Op>
struct OpTag {
  template <class T>
  using Fn = Op<T>;
};

template <class Fn>
cudaError_t visit_op(ReduceOp op, Fn&& fn) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return fn(OpTag<ops::Sum>{});
    case ReduceOp::kProd: return fn(OpTag<ops::Prod>{});
    case ReduceOp::kMin: return fn(OpTag<ops::Min>{});
    case ReduceOp::kMax: return fn(OpTag<ops::Max>{});
  }
  return cudaErrorInvalidValue;
}

// Grid-stride launches: enough blocks to cover the data, capped so that a
// huge buffer does not pay for launching millions of blocks.
inline constexpr int kThreads = 256;
inline unsigned blocks_for(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

__device__ __forceinline__ size_t thread_index() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t grid_stride() {
  return static_cast<size_t>(gridDim.x) * blockDim.x;
}

}  // namespace ringlet::kernels::cuda::detail
