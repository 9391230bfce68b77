// float <-> fp16/bf16 conversion launchers on raw 16-bit patterns, for casts
// done outside a reduction (Compression.fp16's compressed buffers). Four
// elements per access: 16 bytes of floats against 8 bytes of 16-bit values,
// where the two buffers reach those alignments at the same element.
#include "device_types.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;
using detail::Lanes;

constexpr int kL = 4;

template <class S>
struct Narrow {
  uint16_t* out;
  const float* in;

  __device__ void scalar(size_t i) const { out[i] = detail::raw_bits(Element<S>::narrow(in[i])); }
  __device__ Lanes<uint16_t, kL> load(size_t i) const {
    const Lanes<float, kL> x = detail::load_lanes<float, kL>(in + i);
    Lanes<uint16_t, kL> r;
#pragma unroll
    for (int l = 0; l < kL; ++l) r.v[l] = detail::raw_bits(Element<S>::narrow(x.v[l]));
    return r;
  }
  __device__ void store(size_t i, const Lanes<uint16_t, kL>& r) const {
    detail::store_lanes<uint16_t, kL>(out + i, r);
  }
};

template <class S>
struct Widen {
  float* out;
  const uint16_t* in;

  __device__ void scalar(size_t i) const {
    out[i] = Element<S>::widen(detail::from_raw_bits<S>(in[i]));
  }
  __device__ Lanes<float, kL> load(size_t i) const {
    const Lanes<uint16_t, kL> x = detail::load_lanes<uint16_t, kL>(in + i);
    Lanes<float, kL> r;
#pragma unroll
    for (int l = 0; l < kL; ++l) r.v[l] = Element<S>::widen(detail::from_raw_bits<S>(x.v[l]));
    return r;
  }
  __device__ void store(size_t i, const Lanes<float, kL>& r) const {
    detail::store_lanes<float, kL>(out + i, r);
  }
};

template <class F>
__global__ void convert_kernel(F f, size_t n, size_t head, bool vector) {
  detail::elementwise<kL>(f, n, head, vector);
}

// The float side sets the head; the 16-bit side must then be 8-byte aligned.
template <class F>
cudaError_t launch(F f, const float* floats, const uint16_t* halves, size_t count,
                   cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const size_t head = detail::head_elements(floats, sizeof(float), 16, count);
  const bool vector = detail::aligned_after(halves, sizeof(uint16_t), head, 8);
  convert_kernel<F><<<detail::blocks_for_elements<kL>(count), detail::kThreads, 0, stream>>>(
      f, count, head, vector);
  return cudaGetLastError();
}

}  // namespace

cudaError_t float_to_half(uint16_t* out, const float* in, size_t count, cudaStream_t stream) {
  return launch(Narrow<__half>{out, in}, in, out, count, stream);
}
cudaError_t half_to_float(float* out, const uint16_t* in, size_t count, cudaStream_t stream) {
  return launch(Widen<__half>{out, in}, out, in, count, stream);
}
cudaError_t float_to_bfloat16(uint16_t* out, const float* in, size_t count, cudaStream_t stream) {
  return launch(Narrow<__nv_bfloat16>{out, in}, in, out, count, stream);
}
cudaError_t bfloat16_to_float(float* out, const uint16_t* in, size_t count, cudaStream_t stream) {
  return launch(Widen<__nv_bfloat16>{out, in}, out, in, count, stream);
}

}  // namespace ringlet::kernels::cuda
