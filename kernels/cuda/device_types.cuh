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
    case DataType::kFloat32:
      return fn(Tag<float>{});
    case DataType::kFloat64:
      return fn(Tag<double>{});
    case DataType::kFloat16:
      return fn(Tag<__half>{});
    case DataType::kBFloat16:
      return fn(Tag<__nv_bfloat16>{});
    case DataType::kInt8:
      return fn(Tag<int8_t>{});
    case DataType::kUInt8:
      return fn(Tag<uint8_t>{});
    case DataType::kInt32:
      return fn(Tag<int32_t>{});
    case DataType::kInt64:
      return fn(Tag<int64_t>{});
    case DataType::kInt16:
      return fn(Tag<int16_t>{});
    case DataType::kUInt16:
      return fn(Tag<uint16_t>{});
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
    case ReduceOp::kAvg:
      return fn(OpTag<ops::Sum>{});
    case ReduceOp::kProd:
      return fn(OpTag<ops::Prod>{});
    case ReduceOp::kMin:
      return fn(OpTag<ops::Min>{});
    case ReduceOp::kMax:
      return fn(OpTag<ops::Max>{});
  }
  return cudaErrorInvalidValue;
}

// Launch shape. Every kernel is a grid-stride loop, so the grid only has to
// fill the device: past as many blocks as can be resident at once, more blocks
// add scheduling and nothing else.
inline constexpr int kThreads = 256;
// Independent 16-byte loads each thread issues before it stores anything:
// memory speed needs several megabytes in flight, more than one load per
// resident thread gives.
inline constexpr int kUnroll = 4;

// Blocks that fill the current device (its multiprocessor count x the blocks
// of kThreads one multiprocessor holds), read once per device.
unsigned resident_blocks();

// Enough blocks for `items` units of work of one thread each, at least 1, at
// most resident_blocks().
inline unsigned blocks_for(size_t items) {
  const size_t wanted = (items + kThreads - 1) / kThreads;
  const size_t cap = resident_blocks();
  return static_cast<unsigned>(wanted == 0 ? 1 : (wanted < cap ? wanted : cap));
}

__device__ __forceinline__ size_t thread_index() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t grid_stride() {
  return static_cast<size_t>(gridDim.x) * blockDim.x;
}

// L elements of S moved as one load or store of L * sizeof(S) bytes (16 for
// the reductions; the conversions pair 16-byte floats with 8-byte halves).
template <class S, int L>
struct alignas(sizeof(S) * L) Lanes {
  S v[L];
};

// The accesses go through a plain vector type of the same size, and the store
// is spelled in PTX: left to itself the compiler splits the store of a struct
// of 16-bit floats into 4-byte pieces.
template <int Bytes>
struct RawVector;
template <>
struct RawVector<16> {
  using Type = uint4;
};
template <>
struct RawVector<8> {
  using Type = uint2;
};

__device__ __forceinline__ void store_raw(void* p, const uint4& v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void store_raw(void* p, const uint2& v) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}

template <class S, int L>
__device__ __forceinline__ Lanes<S, L> load_lanes(const S* p) {
  using Raw = typename RawVector<sizeof(Lanes<S, L>)>::Type;
  const Raw raw = *reinterpret_cast<const Raw*>(p);
  Lanes<S, L> x;
  memcpy(&x, &raw, sizeof x);
  return x;
}
template <class S, int L>
__device__ __forceinline__ void store_lanes(S* p, const Lanes<S, L>& x) {
  typename RawVector<sizeof(Lanes<S, L>)>::Type raw;
  memcpy(&raw, &x, sizeof raw);
  store_raw(p, raw);
}

// Elements before `p` reaches a multiple of `align` bytes (p is aligned to its
// element, as CUDA requires of every access), at most n.
__host__ __device__ __forceinline__ size_t head_elements(const void* p, size_t element,
                                                         size_t align, size_t n) {
  const size_t past = reinterpret_cast<uintptr_t>(p) % align;
  const size_t head = past == 0 ? 0 : (align - past) / element;
  return head < n ? head : n;
}

// Whether `p`, `head` elements on, is aligned to `align` bytes: every pointer
// of a vectorized loop must reach its alignment at the same element.
__host__ __device__ __forceinline__ bool aligned_after(const void* p, size_t element, size_t head,
                                                       size_t align) {
  return (reinterpret_cast<uintptr_t>(p) + head * element) % align == 0;
}

// Runs the element-wise job `f` over [0, n) on threads tid, tid + stride, ...
// When `vector` is false every element goes through f.scalar(i). Otherwise
// [head, head + L*k) is done L elements at a time: f.load(i) reads and computes
// the L elements from i, f.store(i, x) writes them. kUnroll loads are issued
// before their stores, which is right even when the output is one of the
// inputs, since the chunks of one round are disjoint. The scalar head and tail
// (fewer than L elements each) go to the first threads.
template <int L, class F>
__device__ __forceinline__ void elementwise(const F& f, size_t n, size_t head, bool vector,
                                            size_t tid, size_t stride) {
  if (!vector) {
    for (size_t i = tid; i < n; i += stride) f.scalar(i);
    return;
  }
  const size_t chunks = (n - head) / L;
  const size_t tail = head + chunks * L;
  if (tid < head) f.scalar(tid);
  if (tid < n - tail) f.scalar(tail + tid);
  size_t c = tid;
  for (; c + (kUnroll - 1) * stride < chunks; c += kUnroll * stride) {
    decltype(f.load(size_t{0})) x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x[u] = f.load(head + (c + u * stride) * L);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) f.store(head + (c + u * stride) * L, x[u]);
  }
  for (; c < chunks; c += stride) f.store(head + c * L, f.load(head + c * L));
}

// The same over the whole grid.
template <int L, class F>
__device__ __forceinline__ void elementwise(const F& f, size_t n, size_t head, bool vector) {
  elementwise<L>(f, n, head, vector, thread_index(), grid_stride());
}

// Blocks for an element-wise launch over n elements, L at a time.
template <int L>
inline unsigned blocks_for_elements(size_t n) {
  return blocks_for((n + size_t{L} * kUnroll - 1) / (size_t{L} * kUnroll));
}

// Lanes of a 16-byte vector of S.
template <class S>
inline constexpr int kLanes16 = static_cast<int>(16 / sizeof(S));

}  // namespace ringlet::kernels::cuda::detail
