// copy: memcpy, or non-temporal stores for data that is past the last-level
// cache and will be read next by another core (a peer's shared-memory slot).
#include "isa_loops.h"

namespace ringlet::kernels::cpu {

void copy(void* dst, const void* src, size_t bytes, Store store) {
  if (bytes == 0) return;
  if (store == Store::kNormal) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (detail::use_avx2()) {
    avx2::stream_store(dst, src, bytes);
    avx2::stream_fence();
  } else {
    base::stream_store(dst, src, bytes);
    base::stream_fence();
  }
}

}  // namespace ringlet::kernels::cpu
