// reduce and reduce_many on device memory. Memory bound: every input is read
// once and the output written once, 16 bytes per access where the pointers
// share their alignment, each element widened to its compute type, combined by
// the shared ops.h functor and narrowed back.
#include "device_types.cuh"
#include "fold.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;
using detail::Fold;
using detail::kLanes16;
using detail::Lanes;
using detail::ReduceToAll;

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

// out = the fold, rounded once; out may be one of the inputs.
template <class Op, class S>
struct ReduceMany {
  static constexpr int L = kLanes16<S>;
  using C = typename Element<S>::Compute;
  Fold<Op, S> fold;
  S* out;

  __device__ void scalar(size_t i) const { out[i] = Element<S>::narrow(fold.at(i)); }
  __device__ Lanes<S, L> load(size_t i) const {
    C acc[L];
    fold.lanes(i, acc);
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
  const size_t head = detail::head_elements(f.out, sizeof(S), 16, n);
  detail::elementwise<ReduceMany<Op, S>::L>(f, n, head, f.fold.aligned_after(head));
}

template <class Op, class S>
__global__ void reduce_to_all_kernel(ReduceToAll<Op, S> f, size_t n) {
  detail::reduce_to_all(f, n, detail::thread_index(), detail::grid_stride());
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
              F{Fold<Op, S>{inputs, num_inputs, false, 1}, static_cast<S*>(out)}, count);
      return cudaGetLastError();
    });
  });
}

cudaError_t reduce_many_to_all(DataType dtype, ReduceOp op, void* const* outputs, int num_outputs,
                               const void* const* inputs, int num_inputs, size_t count,
                               int contributors, double prescale, double postscale,
                               cudaStream_t stream) {
  if (num_inputs < 1 || num_outputs < 1 || contributors < 1) return cudaErrorInvalidValue;
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    return detail::visit_op(op, [&](auto op_tag) {
      using C = typename Element<S>::Compute;
      using Op = typename decltype(op_tag)::template Fn<C>;
      using F = ReduceToAll<Op, S>;
      using Scale = typename F::Scale;
      if (count == 0) return cudaSuccess;
      const double factor = ops::result_scale(op, postscale, contributors);
      const F f{Fold<Op, S>{inputs, num_inputs, prescale != 1.0, static_cast<Scale>(prescale)},
                outputs, num_outputs, factor != 1.0, static_cast<Scale>(factor)};
      reduce_to_all_kernel<Op, S>
          <<<detail::blocks_for_elements<F::L>(count), detail::kThreads, 0, stream>>>(f, count);
      return cudaGetLastError();
    });
  });
}

}  // namespace ringlet::kernels::cuda
