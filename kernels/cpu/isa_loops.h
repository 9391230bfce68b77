// Compiles loops.inc twice, once per instruction set, into namespaces `base`
// and `avx2`; callers pick one per call with detail::use_avx2(). Both copies
// have internal linkage, so no inline function compiled for AVX2 can be
// chosen by the linker for a caller running the baseline path. (A separate
// translation unit built with -mavx2 would risk exactly that.)
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "dispatch.h"
#include "ringlet/kernels/half_bits.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::kernels::cpu {
namespace {

namespace base {
inline constexpr bool kAvx2 = false;
#include "loops.inc"
}  // namespace base

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace avx2 {
inline constexpr bool kAvx2 = true;
#include "loops.inc"
}  // namespace avx2
#pragma GCC pop_options
#else
namespace avx2 = base;  // never selected: detect() reports kBaseline
#endif

}  // namespace
}  // namespace ringlet::kernels::cpu
