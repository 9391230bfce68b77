// pack and unpack: the copies between many tensors and one fusion buffer,
// applying the pre- or post-scale on the way so that scaling costs no extra
// pass over memory.
#include "isa_loops.h"

namespace ringlet::kernels::cpu {
namespace {

// Copies one tensor: an exact memcpy when the factor is 1 (bit-exact, also for
// NaN payloads and integers), a scaling copy otherwise.
void copy_scaled(DataType dtype, void* out, const void* in, size_t count, double factor,
                 bool avx2) {
  if (count == 0) return;
  if (factor == 1.0) {
    std::memcpy(out, in, count * dtype_size(dtype));
    return;
  }
  detail::visit_dtype(dtype, [&](auto kind) {
    using Kind = decltype(kind);
    if (avx2) {
      avx2::scale_copy<Kind>(out, in, count, factor);
    } else {
      base::scale_copy<Kind>(out, in, count, factor);
    }
  });
}

}  // namespace

size_t pack(DataType dtype, void* fused, std::span<const ConstSegment> tensors, double factor) {
  if (!is_valid(dtype)) detail::bad_argument("dtype", static_cast<long long>(dtype));
  const size_t elem = dtype_size(dtype);
  const bool avx2 = detail::use_avx2();
  size_t offset = 0;
  for (const ConstSegment& t : tensors) {
    copy_scaled(dtype, static_cast<char*>(fused) + offset * elem, t.data, t.count, factor, avx2);
    offset += t.count;
  }
  return offset;
}

size_t unpack(DataType dtype, const void* fused, std::span<const Segment> tensors,
              double factor) {
  if (!is_valid(dtype)) detail::bad_argument("dtype", static_cast<long long>(dtype));
  const size_t elem = dtype_size(dtype);
  const bool avx2 = detail::use_avx2();
  size_t offset = 0;
  for (const Segment& t : tensors) {
    copy_scaled(dtype, t.data, static_cast<const char*>(fused) + offset * elem, t.count, factor,
                avx2);
    offset += t.count;
  }
  return offset;
}

}  // namespace ringlet::kernels::cpu
