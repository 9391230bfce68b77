// scale and finish_average: multiplying a buffer in place, and turning a sum
// over n ranks into their average.
#include "isa_loops.h"

namespace ringlet::kernels::cpu {

void scale(DataType dtype, void* buf, size_t count, double factor) {
  const bool avx2 = detail::use_avx2();
  detail::visit_dtype(dtype, [&](auto kind) {
    using Kind = decltype(kind);
    if (count == 0 || factor == 1.0) return;
    if (avx2) {
      avx2::scale_copy<Kind>(buf, buf, count, factor);
    } else {
      base::scale_copy<Kind>(buf, buf, count, factor);
    }
  });
}

void finish_average(DataType dtype, void* buf, size_t count, int contributors) {
  if (contributors < 1) detail::bad_argument("number of contributors", contributors);
  const bool avx2 = detail::use_avx2();
  detail::visit_dtype(dtype, [&](auto kind) {
    using Kind = decltype(kind);
    using T = typename Kind::Storage;
    if (count == 0 || contributors == 1) return;
    if constexpr (std::is_integral_v<typename Kind::Compute>) {
      // Integer division toward zero, not a multiplication by a rounded 1/n.
      if (avx2) {
        avx2::divide(static_cast<T*>(buf), count, contributors);
      } else {
        base::divide(static_cast<T*>(buf), count, contributors);
      }
    } else {
      // 1/n in double, then rounded to the compute type by ScaleBy: the same
      // factor the CUDA kernels use.
      const double inverse = 1.0 / contributors;
      if (avx2) {
        avx2::scale_copy<Kind>(buf, buf, count, inverse);
      } else {
        base::scale_copy<Kind>(buf, buf, count, inverse);
      }
    }
  });
}

}  // namespace ringlet::kernels::cpu
