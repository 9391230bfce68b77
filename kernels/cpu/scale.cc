// scale: multiplying a buffer in place (a postscale, or an average's result
// by its one factor).
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

}  // namespace ringlet::kernels::cpu
