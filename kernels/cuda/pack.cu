// Batched pack/unpack: one launch for all the tensors of a fusion buffer.
// blockIdx.y picks the segment (striding when there are more than the grid's
// y extent), blockIdx.x/threadIdx.x stride over its elements; blocks past a
// short segment's end simply find no work. One launch instead of one per
// tensor matters because a fusion buffer holds hundreds of small tensors and
// each launch costs microseconds.
#include "device_types.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;

template <class S, bool kToFused>
__global__ void pack_kernel(S* fused, const FusedSegment* segments, int num_segments, bool exact,
                            ops::ScaleBy<typename Element<S>::Compute> by) {
  for (int s = blockIdx.y; s < num_segments; s += gridDim.y) {
    const FusedSegment seg = segments[s];
    S* tensor = static_cast<S*>(seg.tensor);
    S* slot = fused + seg.offset;
    S* dst = kToFused ? slot : tensor;
    const S* src = kToFused ? tensor : slot;
    for (size_t i = detail::thread_index(); i < seg.count; i += detail::grid_stride()) {
      // Factor 1 copies bits, so NaN payloads and integers pass untouched.
      dst[i] = exact ? src[i] : Element<S>::narrow(by(Element<S>::widen(src[i])));
    }
  }
}

template <bool kToFused>
cudaError_t launch(DataType dtype, void* fused, const FusedSegment* segments, int num_segments,
                   size_t max_count, double factor, cudaStream_t stream) {
  if (num_segments < 0) return cudaErrorInvalidValue;
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    using C = typename Element<S>::Compute;
    if (num_segments == 0) return cudaSuccess;
    // Spread the largest segment over up to 1024 blocks in x.
    const unsigned x = max_count == 0 ? 1u : (detail::blocks_for(max_count) < 1024 ? detail::blocks_for(max_count) : 1024u);
    const unsigned y = num_segments < 65535 ? static_cast<unsigned>(num_segments) : 65535u;
    pack_kernel<S, kToFused><<<dim3(x, y), detail::kThreads, 0, stream>>>(
        static_cast<S*>(fused), segments, num_segments, factor == 1.0,
        ops::ScaleBy<C>{static_cast<ops::ScaleType<C>>(factor)});
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t pack(DataType dtype, void* fused, const FusedSegment* segments, int num_segments,
                 size_t max_count, double factor, cudaStream_t stream) {
  return launch<true>(dtype, fused, segments, num_segments, max_count, factor, stream);
}

cudaError_t unpack(DataType dtype, const void* fused, const FusedSegment* segments,
                   int num_segments, size_t max_count, double factor, cudaStream_t stream) {
  // The kernel reads from `fused` when unpacking; the cast only shares code.
  return launch<false>(dtype, const_cast<void*>(fused), segments, num_segments, max_count, factor,
                       stream);
}

}  // namespace ringlet::kernels::cuda
