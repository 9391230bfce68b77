// scale and finish_average on device memory, with ops.h's ScaleBy and
// DivideBy so that the rounding and saturation are the CPU's.
#include <type_traits>

#include "device_types.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;

template <class S, class F>
__global__ void map_kernel(S* buf, size_t n, F f) {
  for (size_t i = detail::thread_index(); i < n; i += detail::grid_stride()) {
    buf[i] = Element<S>::narrow(f(Element<S>::widen(buf[i])));
  }
}

template <class S, class F>
cudaError_t launch_map(void* buf, size_t count, F f, cudaStream_t stream) {
  map_kernel<S, F><<<detail::blocks_for(count), detail::kThreads, 0, stream>>>(
      static_cast<S*>(buf), count, f);
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

cudaError_t finish_average(DataType dtype, void* buf, size_t count, int contributors,
                           cudaStream_t stream) {
  if (contributors < 1) return cudaErrorInvalidValue;
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    using C = typename Element<S>::Compute;
    if (count == 0 || contributors == 1) return cudaSuccess;
    if constexpr (std::is_integral_v<C>) {
      return launch_map<S>(buf, count, ops::DivideBy<C>{contributors}, stream);
    } else {
      const double inverse = 1.0 / contributors;
      return launch_map<S>(buf, count, ops::ScaleBy<C>{static_cast<ops::ScaleType<C>>(inverse)},
                           stream);
    }
  });
}

}  // namespace ringlet::kernels::cuda
