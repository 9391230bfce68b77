// reduce and reduce_many on device memory. Memory bound: every input is read
// once and the output written once, 16 bytes per access where the pointers
// share their alignment, each element widened to its compute type, combined by
// the shared ops.h functor and narrowed back.
#include <type_traits>

#include "device_types.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;
using detail::kLanes16;
using detail::Lanes;

template <class Op, class S>
struct ReduceTwo {
  static constexpr int L = kLanes16<S>;
  S* out;
  const S* a;
  const S* b;

  __device__ void scalar(size_t i) const {
    out[i] = Element<S>::narrow(Op{}(Element<S>::widen(a[i]), Element<S>::widen(b[i])));
  }
  __device__ Lanes<S, L> load(size_t i) const {
    const Lanes<S, L> x = detail::load_lanes<S, L>(a + i), y = detail::load_lanes<S, L>(b + i);
    Lanes<S, L> r;
#pragma unroll
    for (int l = 0; l < L; ++l) {
      r.v[l] = Element<S>::narrow(Op{}(Element<S>::widen(x.v[l]), Element<S>::widen(y.v[l])));
    }
    return r;
  }
  __device__ void store(size_t i, const Lanes<S, L>& r) const {
    detail::store_lanes<S, L>(out + i, r);
  }
};

template <class Op, class S>
__global__ void reduce_kernel(ReduceTwo<Op, S> f, size_t n, size_t head, bool vector) {
  detail::elementwise<ReduceTwo<Op, S>::L>(f, n, head, vector);
}

// Each thread folds its elements across all inputs in registers, in input
// order; out may be one of the inputs.
template <class Op, class S>
struct ReduceMany {
  static constexpr int L = kLanes16<S>;
  using C = typename Element<S>::Compute;
  S* out;
  const void* const* inputs;
  int k;

  __device__ const S* input(int j) const { return static_cast<const S*>(inputs[j]); }
  __device__ S reduced(size_t i) const {
    C acc = Element<S>::widen(input(0)[i]);
    for (int j = 1; j < k; ++j) acc = Op{}(acc, Element<S>::widen(input(j)[i]));
    return Element<S>::narrow(acc);
  }
  __device__ void scalar(size_t i) const { out[i] = reduced(i); }
  __device__ Lanes<S, L> load(size_t i) const {
    C acc[L];
    const Lanes<S, L> first = detail::load_lanes<S, L>(input(0) + i);
#pragma unroll
    for (int l = 0; l < L; ++l) acc[l] = Element<S>::widen(first.v[l]);
    for (int j = 1; j < k; ++j) {
      const Lanes<S, L> x = detail::load_lanes<S, L>(input(j) + i);
#pragma unroll
      for (int l = 0; l < L; ++l) acc[l] = Op{}(acc[l], Element<S>::widen(x.v[l]));
    }
    Lanes<S, L> r;
#pragma unroll
    for (int l = 0; l < L; ++l) r.v[l] = Element<S>::narrow(acc[l]);
    return r;
  }
  __device__ void store(size_t i, const Lanes<S, L>& r) const {
    detail::store_lanes<S, L>(out + i, r);
  }
};

template <class Op, class S>
__global__ void reduce_many_kernel(ReduceMany<Op, S> f, size_t n) {
  // The pointers live on the device, so the alignment is decided here, once
  // per thread, from the same values on every thread.
  constexpr int L = ReduceMany<Op, S>::L;
  const size_t head = detail::head_elements(f.out, sizeof(S), 16, n);
  bool vector = true;
  for (int j = 0; j < f.k; ++j)
    vector = vector && detail::aligned_after(f.input(j), sizeof(S), head, 16);
  detail::elementwise<L>(f, n, head, vector);
}

// ReduceMany's result, averaged where asked (finish_average's arithmetic on
// the rounded sum), stored to every output.
template <class Op, class S>
struct ReduceToAll {
  static constexpr int L = kLanes16<S>;
  using C = typename Element<S>::Compute;
  ReduceMany<Op, S> sum;  // its `out` is unused
  void* const* outputs;
  int m;
  int contributors;           // > 1: divide (kAvg)
  ops::ScaleType<C> inverse;  // 1 / contributors, for floating types

  __device__ S output_value(S x) const {
    if (contributors <= 1) return x;
    if constexpr (std::is_integral_v<C>) {
      return Element<S>::narrow(ops::DivideBy<C>{contributors}(Element<S>::widen(x)));
    } else {
      return Element<S>::narrow(ops::ScaleBy<C>{inverse}(Element<S>::widen(x)));
    }
  }
  __device__ S* output(int j) const { return static_cast<S*>(outputs[j]); }
  __device__ void scalar(size_t i) const {
    const S v = output_value(sum.reduced(i));
    for (int j = 0; j < m; ++j) output(j)[i] = v;
  }
  __device__ Lanes<S, L> load(size_t i) const {
    Lanes<S, L> r = sum.load(i);
#pragma unroll
    for (int l = 0; l < L; ++l) r.v[l] = output_value(r.v[l]);
    return r;
  }
  __device__ void store(size_t i, const Lanes<S, L>& r) const {
    for (int j = 0; j < m; ++j) detail::store_lanes<S, L>(output(j) + i, r);
  }
};

template <class Op, class S>
__global__ void reduce_to_all_kernel(ReduceToAll<Op, S> f, size_t n) {
  constexpr int L = ReduceToAll<Op, S>::L;
  const size_t head = detail::head_elements(f.output(0), sizeof(S), 16, n);
  bool vector = true;
  for (int j = 0; j < f.sum.k; ++j)
    vector = vector && detail::aligned_after(f.sum.input(j), sizeof(S), head, 16);
  for (int j = 1; j < f.m; ++j)
    vector = vector && detail::aligned_after(f.output(j), sizeof(S), head, 16);
  detail::elementwise<L>(f, n, head, vector);
}

}  // namespace

cudaError_t reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b,
                   size_t count, cudaStream_t stream) {
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    return detail::visit_op(op, [&](auto op_tag) {
      using Op = typename decltype(op_tag)::template Fn<typename Element<S>::Compute>;
      using F = ReduceTwo<Op, S>;
      if (count == 0) return cudaSuccess;
      const size_t head = detail::head_elements(out, sizeof(S), 16, count);
      const bool vector = detail::aligned_after(a, sizeof(S), head, 16) &&
                          detail::aligned_after(b, sizeof(S), head, 16);
      reduce_kernel<Op, S>
          <<<detail::blocks_for_elements<F::L>(count), detail::kThreads, 0, stream>>>(
              F{static_cast<S*>(out), static_cast<const S*>(a), static_cast<const S*>(b)}, count,
              head, vector);
      return cudaGetLastError();
    });
  });
}

cudaError_t reduce_many(DataType dtype, ReduceOp op, void* out, const void* const* inputs,
                        int num_inputs, size_t count, cudaStream_t stream) {
  if (num_inputs < 1) return cudaErrorInvalidValue;
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    return detail::visit_op(op, [&](auto op_tag) {
      using Op = typename decltype(op_tag)::template Fn<typename Element<S>::Compute>;
      using F = ReduceMany<Op, S>;
      if (count == 0) return cudaSuccess;
      reduce_many_kernel<Op, S>
          <<<detail::blocks_for_elements<F::L>(count), detail::kThreads, 0, stream>>>(
              F{static_cast<S*>(out), inputs, num_inputs}, count);
      return cudaGetLastError();
    });
  });
}

cudaError_t reduce_many_to_all(DataType dtype, ReduceOp op, void* const* outputs, int num_outputs,
                               const void* const* inputs, int num_inputs, size_t count,
                               int contributors, cudaStream_t stream) {
  if (num_inputs < 1 || num_outputs < 1 || contributors < 1) return cudaErrorInvalidValue;
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    return detail::visit_op(op, [&](auto op_tag) {
      using C = typename Element<S>::Compute;
      using Op = typename decltype(op_tag)::template Fn<C>;
      using F = ReduceToAll<Op, S>;
      if (count == 0) return cudaSuccess;
      const int divide = op == ReduceOp::kAvg ? contributors : 1;
      const F f{ReduceMany<Op, S>{nullptr, inputs, num_inputs}, outputs, num_outputs, divide,
                static_cast<ops::ScaleType<C>>(1.0 / divide)};
      reduce_to_all_kernel<Op, S>
          <<<detail::blocks_for_elements<F::L>(count), detail::kThreads, 0, stream>>>(f, count);
      return cudaGetLastError();
    });
  });
}

}  // namespace ringlet::kernels::cuda
