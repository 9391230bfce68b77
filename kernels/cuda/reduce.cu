// reduce and reduce_many on device memory. Element-wise and memory bound:
// one grid-stride loop, each element widened to its compute type, combined by
// the shared ops.h functor and narrowed back.
#include "device_types.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;

template <class Op, class S>
__global__ void reduce_kernel(S* out, const S* a, const S* b, size_t n) {
  const Op op{};
  for (size_t i = detail::thread_index(); i < n; i += detail::grid_stride()) {
    out[i] = Element<S>::narrow(op(Element<S>::widen(a[i]), Element<S>::widen(b[i])));
  }
}

// Each thread folds its element across all inputs in a register, so every
// input is read once and out written once; out may be one of the inputs.
template <class Op, class S>
__global__ void reduce_many_kernel(S* out, const void* const* inputs, int k, size_t n) {
  const Op op{};
  for (size_t i = detail::thread_index(); i < n; i += detail::grid_stride()) {
    auto acc = Element<S>::widen(static_cast<const S*>(inputs[0])[i]);
    for (int j = 1; j < k; ++j) acc = op(acc, Element<S>::widen(static_cast<const S*>(inputs[j])[i]));
    out[i] = Element<S>::narrow(acc);
  }
}

}  // namespace

cudaError_t reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b,
                   size_t count, cudaStream_t stream) {
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    return detail::visit_op(op, [&](auto op_tag) {
      using Op = typename decltype(op_tag)::template Fn<typename Element<S>::Compute>;
      if (count == 0) return cudaSuccess;
      reduce_kernel<Op, S><<<detail::blocks_for(count), detail::kThreads, 0, stream>>>(
          static_cast<S*>(out), static_cast<const S*>(a), static_cast<const S*>(b), count);
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
      if (count == 0) return cudaSuccess;
      reduce_many_kernel<Op, S><<<detail::blocks_for(count), detail::kThreads, 0, stream>>>(
          static_cast<S*>(out), inputs, num_inputs, count);
      return cudaGetLastError();
    });
  });
}

}  // namespace ringlet::kernels::cuda
