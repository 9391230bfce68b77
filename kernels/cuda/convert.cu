// float <-> fp16/bf16 conversion launchers on raw 16-bit patterns, for casts
// done outside a reduction (e.g. a compressed fusion buffer).
#include "device_types.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;

template <class S>
__global__ void narrow_kernel(uint16_t* out, const float* in, size_t n) {
  for (size_t i = detail::thread_index(); i < n; i += detail::grid_stride()) {
    out[i] = detail::raw_bits(Element<S>::narrow(in[i]));
  }
}

template <class S>
__global__ void widen_kernel(float* out, const uint16_t* in, size_t n) {
  for (size_t i = detail::thread_index(); i < n; i += detail::grid_stride()) {
    out[i] = Element<S>::widen(detail::from_raw_bits<S>(in[i]));
  }
}

template <class S>
cudaError_t narrow(uint16_t* out, const float* in, size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  narrow_kernel<S><<<detail::blocks_for(count), detail::kThreads, 0, stream>>>(out, in, count);
  return cudaGetLastError();
}

template <class S>
cudaError_t widen(float* out, const uint16_t* in, size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  widen_kernel<S><<<detail::blocks_for(count), detail::kThreads, 0, stream>>>(out, in, count);
  return cudaGetLastError();
}

}  // namespace

cudaError_t float_to_half(uint16_t* out, const float* in, size_t count, cudaStream_t stream) {
  return narrow<__half>(out, in, count, stream);
}
cudaError_t half_to_float(float* out, const uint16_t* in, size_t count, cudaStream_t stream) {
  return widen<__half>(out, in, count, stream);
}
cudaError_t float_to_bfloat16(uint16_t* out, const float* in, size_t count, cudaStream_t stream) {
  return narrow<__nv_bfloat16>(out, in, count, stream);
}
cudaError_t bfloat16_to_float(float* out, const uint16_t* in, size_t count, cudaStream_t stream) {
  return widen<__nv_bfloat16>(out, in, count, stream);
}

}  // namespace ringlet::kernels::cuda
