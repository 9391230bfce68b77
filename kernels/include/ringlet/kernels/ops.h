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
// - scale: floats multiply in the compute type by the factor rounded to it
//   (float for fp32/fp16/bf16, double for fp64); integers multiply in double,
//   round to nearest (ties to even) and saturate to the type's range; a NaN
//   product gives 0.
// - divide: integers divide toward zero (C++ semantics); used for averages.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

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

template <class T>
struct ScaleBy {
  ScaleType<T> factor;

  RINGLET_HD T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      const double v = rint(static_cast<double>(x) * factor);
      // Compare against the range as doubles: kMax of int64 rounds up to 2^63,
      // so ">=" is exactly "does not fit".
      constexpr double lo = static_cast<double>(IntRange<T>::kMin);
      constexpr double hi = static_cast<double>(IntRange<T>::kMax);
      if (v != v) return T(0);
      if (v <= lo) return IntRange<T>::kMin;
      if (v >= hi) return IntRange<T>::kMax;
      return static_cast<T>(v);
    } else {
      return x * factor;
    }
  }
};

// Integer average: the sum divided by the number of contributors, toward zero.
template <class T>
struct DivideBy {
  int divisor;  // > 0
  RINGLET_HD T operator()(T x) const {
    if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(static_cast<int64_t>(x) / divisor);
    } else {
      return static_cast<T>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisor));
    }
  }
};

}  // namespace ringlet::kernels::ops
