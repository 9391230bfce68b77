// The one description of each element-wise operation, shared by the CPU
// kernels (plain g++) and the CUDA kernels (nvcc), so that the two cannot
// disagree. Everything here works on a *compute* type: the element type itself,
// except fp16/bf16, which are computed in float (see half_bits.h for the
// conversions on the way in and out).
//
// Semantics, per compute type:
// - Integers: sum and product wrap (two's complement). They are computed in the
//   unsigned type of the same width, where wrapping is defined.
// - Floats: min and max propagate NaN: if either operand is NaN the result is
//   NaN (the first operand's NaN when both are). IEEE minNum/maxNum would drop
//   the NaN instead, hiding a diverged rank behind a healthy one. Among equal
//   values (-0 and +0) the second operand is returned.
// - scale (Horovod's ScaleBuffer, so that a Horovod script gets its numbers):
//   floats multiply once, in the compute type, by the factor rounded to it
//   (float for fp32/fp16/bf16, double for fp64); integers multiply in double
//   and convert back toward zero, as C++ converts. Where C++ leaves the
//   conversion undefined (a product past the type's range, or NaN) the result
//   is defined here: it saturates to the range, and NaN gives 0.
// - An allreduce or reducescatter computes
//     result = scale(result_scale(op, post, n), op over ranks of scale(pre, x))
//   each scale applied only when its factor is not 1.0: an average is a sum
//   whose 1/n joins the postscale in double, so its result is rounded once
//   (integers: sum * (post / n) toward zero, not a division then a scale).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ringlet/types.h"

#if defined(__CUDACC__)
#define RINGLET_HD __host__ __device__ __forceinline__
#else
#define RINGLET_HD inline __attribute__((always_inline))
#endif

namespace ringlet::kernels::ops {

// Wrapping integer arithmetic: convert to unsigned (well defined), operate,
// convert back (well defined, modular, since C++20). Types narrower than int
// promote to int, where the product of two bytes still fits.
template <class T>
RINGLET_HD T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T>
RINGLET_HD T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

template <class T>
struct Sum {
  RINGLET_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return wrap_add(a, b);
    } else {
      return a + b;
    }
  }
};

template <class T>
struct Prod {
  RINGLET_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return wrap_mul(a, b);
    } else {
      return a * b;
    }
  }
};

template <class T>
struct Min {
  RINGLET_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      // a != a is the NaN test that vectorizes (an unordered compare).
      return (a < b || a != a) ? a : b;
    }
  }
};

template <class T>
struct Max {
  RINGLET_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      return (a > b || a != a) ? a : b;
    }
  }
};

// Range of an integer element type, derived from its width (two's
// complement): std::numeric_limits is not callable from device code without
// relaxed constexpr.
template <class T>
struct IntRange {
  using U = std::make_unsigned_t<T>;
  static constexpr T kMax = std::is_signed_v<T> ? static_cast<T>(static_cast<U>(~U(0)) >> 1)
                                                : static_cast<T>(~U(0));
  static constexpr T kMin = std::is_signed_v<T> ? static_cast<T>(-kMax - 1) : T(0);
};

// The type a scale factor is applied in: double for fp64 and the integers
// (exact for every int32 and for int64 up to 2^53), float otherwise.
template <class T>
using ScaleType =
    std::conditional_t<std::is_same_v<T, double> || std::is_integral_v<T>, double, float>;

// v converted to the integer type T toward zero, saturating past the range,
// NaN to 0. Types narrower than int64 have bounds that doubles hold exactly:
// the clamp happens in double and the conversion is the one C++ defines, a
// form GCC vectorizes (min, max, cvttpd2dq). int64's upper bound rounds up to
// 2^63, so ">=" is exactly "does not fit" there.
template <class T>
RINGLET_HD T truncate_to(double v) {
  constexpr double lo = static_cast<double>(IntRange<T>::kMin);
  constexpr double hi = static_cast<double>(IntRange<T>::kMax);
  if constexpr (sizeof(T) < sizeof(int64_t)) {
    // The conversion goes through int32: a type it cannot hold (uint32)
    // would wrap, so it needs a branch of its own.
    static_assert(static_cast<int64_t>(IntRange<T>::kMin) >= IntRange<int32_t>::kMin &&
                      static_cast<int64_t>(IntRange<T>::kMax) <= IntRange<int32_t>::kMax,
                  "truncate_to: this integer type does not fit in int32");
    v = v != v ? 0.0 : v;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return static_cast<T>(static_cast<int32_t>(v));
  } else {
    if (v != v) return T(0);
    if (v <= lo) return IntRange<T>::kMin;
    if (v >= hi) return IntRange<T>::kMax;
    return static_cast<T>(v);
  }
}

template <class T>
struct ScaleBy {
  ScaleType<T> factor;

  RINGLET_HD T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return truncate_to<T>(static_cast<double>(x) * factor);
    } else {
      return x * factor;
    }
  }
};

// The one factor a reduction's result is scaled by: the postscale, divided
// for an average by the number of contributors (in double, as Horovod divides
// its postscale by the process set's size). Scale by it only when it is not
// 1.0, as for every factor.
constexpr double result_scale(ReduceOp op, double postscale, int contributors) {
  return op == ReduceOp::kAvg ? postscale / contributors : postscale;
}

}  // namespace ringlet::kernels::ops
