// scale on device memory, with ops.h's ScaleBy so that the rounding,
// truncation and saturation are the CPU's; 16 bytes per access after a
// scalar head that reaches the buffer's alignment.
#include "device_types.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;
using detail::kLanes16;
using detail::Lanes;

template <class S, class F>
struct Map {
  static constexpr int L = kLanes16<S>;
  S* buf;
  F f;

  __device__ void scalar(size_t i) const {
    buf[i] = Element<S>::narrow(f(Element<S>::widen(buf[i])));
  }
  __device__ Lanes<S, L> load(size_t i) const {
    Lanes<S, L> x = detail::load_lanes<S, L>(buf + i);
#pragma unroll
    for (int l = 0; l < L; ++l) x.v[l] = Element<S>::narrow(f(Element<S>::widen(x.v[l])));
    return x;
  }
  __device__ void store(size_t i, const Lanes<S, L>& x) const {
    detail::store_lanes<S, L>(buf + i, x);
  }
};

template <class S, class F>
__global__ void map_kernel(Map<S, F> m, size_t n, size_t head) {
  detail::elementwise<Map<S, F>::L>(m, n, head, true);
}

template <class S, class F>
cudaError_t launch_map(void* buf, size_t count, F f, cudaStream_t stream) {
  const size_t head = detail::head_elements(buf, sizeof(S), 16, count);
  map_kernel<S, F>
      <<<detail::blocks_for_elements<Map<S, F>::L>(count), detail::kThreads, 0, stream>>>(
          Map<S, F>{static_cast<S*>(buf), f}, count, head);
  return cudaGetLastError();
}

}  // namespace

cudaError_t scale(DataType dtype, void* buf, size_t count, double factor, cudaStream_t stream) {
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    using C = typename Element<S>::Compute;
    if (count == 0 || factor == 1.0) return cudaSuccess;
    return launch_map<S>(buf, count, ops::ScaleBy<C>{static_cast<ops::ScaleType<C>>(factor)},
                         stream);
  });
}

}  // namespace ringlet::kernels::cuda
