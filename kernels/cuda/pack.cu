// Batched pack/unpack: one launch for all the tensors of a fusion buffer.
// The fused buffer is cut into tiles of equal size; each block takes tiles in
// a grid-stride loop and copies the part of every segment that falls in its
// tile, so the work is balanced whatever the mix of tensor sizes (one launch
// instead of one per tensor matters because a fusion buffer holds hundreds of
// small tensors and each launch costs microseconds). A segment whose tensor
// and slot share their alignment moves 16 bytes per access.
#include "device_types.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;
using detail::kLanes16;
using detail::Lanes;

// Four rounds of a block's 16-byte loads, kUnroll each: large enough that the
// search for a tile's first segment costs little beside its copy.
constexpr size_t kTileBytes = size_t{4} * detail::kThreads * 16 * detail::kUnroll;

template <class S>
struct Copy {
  static constexpr int L = kLanes16<S>;
  using C = typename Element<S>::Compute;
  S* dst;
  const S* src;
  bool exact;  // factor 1: bits are copied, so NaN payloads and integers pass untouched
  ops::ScaleBy<C> by;

  __device__ S one(S x) const { return exact ? x : Element<S>::narrow(by(Element<S>::widen(x))); }
  __device__ void scalar(size_t i) const { dst[i] = one(src[i]); }
  __device__ Lanes<S, L> load(size_t i) const {
    Lanes<S, L> x = detail::load_lanes<S, L>(src + i);
    if (!exact) {
#pragma unroll
      for (int l = 0; l < L; ++l) x.v[l] = Element<S>::narrow(by(Element<S>::widen(x.v[l])));
    }
    return x;
  }
  __device__ void store(size_t i, const Lanes<S, L>& x) const {
    detail::store_lanes<S, L>(dst + i, x);
  }
};

// The first segment at or after `from` that ends past element `at`; the
// segments are sorted by offset and do not overlap, so their ends are sorted too.
__device__ int first_ending_after(const FusedSegment* segments, int from, int num, size_t at) {
  int lo = from, hi = num;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (segments[mid].offset + segments[mid].count > at) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

template <class S, bool kToFused>
__global__ void pack_kernel(S* fused, const FusedSegment* segments, int num_segments,
                            size_t fused_count, bool exact,
                            ops::ScaleBy<typename Element<S>::Compute> by) {
  constexpr size_t kTile = kTileBytes / sizeof(S);
  const size_t tiles = (fused_count + kTile - 1) / kTile;
  int s = 0;  // tiles only move forward, and so does their first segment
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const size_t lo = t * kTile;
    const size_t hi = lo + kTile < fused_count ? lo + kTile : fused_count;
    s = first_ending_after(segments, s, num_segments, lo);
    for (int j = s; j < num_segments && segments[j].offset < hi; ++j) {
      const FusedSegment seg = segments[j];
      const size_t begin = seg.offset > lo ? seg.offset : lo;
      const size_t end = seg.offset + seg.count < hi ? seg.offset + seg.count : hi;
      if (begin >= end) continue;
      S* slot = fused + begin;
      S* tensor = static_cast<S*>(seg.tensor) + (begin - seg.offset);
      const Copy<S> f{kToFused ? slot : tensor, kToFused ? tensor : slot, exact, by};
      const size_t n = end - begin;
      const size_t head = detail::head_elements(f.dst, sizeof(S), 16, n);
      const bool vector = detail::aligned_after(f.src, sizeof(S), head, 16);
      detail::elementwise<Copy<S>::L>(f, n, head, vector, threadIdx.x, blockDim.x);
    }
  }
}

template <bool kToFused>
cudaError_t launch(DataType dtype, void* fused, const FusedSegment* segments, int num_segments,
                   size_t fused_count, double factor, cudaStream_t stream) {
  if (num_segments < 0) return cudaErrorInvalidValue;
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    using C = typename Element<S>::Compute;
    if (num_segments == 0 || fused_count == 0) return cudaSuccess;
    const size_t tiles = (fused_count + kTileBytes / sizeof(S) - 1) / (kTileBytes / sizeof(S));
    pack_kernel<S, kToFused>
        <<<detail::blocks_for(tiles * detail::kThreads), detail::kThreads, 0, stream>>>(
            static_cast<S*>(fused), segments, num_segments, fused_count, factor == 1.0,
            ops::ScaleBy<C>{static_cast<ops::ScaleType<C>>(factor)});
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t pack(DataType dtype, void* fused, const FusedSegment* segments, int num_segments,
                 size_t fused_count, double factor, cudaStream_t stream) {
  return launch<true>(dtype, fused, segments, num_segments, fused_count, factor, stream);
}

cudaError_t unpack(DataType dtype, const void* fused, const FusedSegment* segments,
                   int num_segments, size_t fused_count, double factor, cudaStream_t stream) {
  // The kernel reads from `fused` when unpacking; the cast only shares code.
  return launch<false>(dtype, const_cast<void*>(fused), segments, num_segments, fused_count, factor,
                       stream);
}

}  // namespace ringlet::kernels::cuda
