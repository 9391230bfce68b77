// Which instruction set the kernels run with. Detected once, at first use,
// from CPUID (the library is shipped without -march, so the AVX2 paths exist
// next to the baseline ones and are chosen here).
#include "dispatch.h"

#include <atomic>
#include <string>

#include "ringlet/common/failure.h"

namespace ringlet::kernels::cpu {
namespace {

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // The AVX2 loops also use F16C for the fp16 conversions. FMA is left out on
  // purpose: the kernels never compute a*b+c, and not enabling it guarantees
  // that no contraction can make the CPU round differently from the GPU.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
    return Isa::kAvx2;
  }
#endif
  return Isa::kBaseline;
}

std::atomic<Isa>& selected() {
  static std::atomic<Isa> isa{best_isa()};
  return isa;
}

}  // namespace

Isa best_isa() {
  static const Isa best = detect();
  return best;
}

Isa active_isa() { return selected().load(std::memory_order_relaxed); }

void set_isa(Isa isa) {
  if (isa == Isa::kAvx2 && best_isa() != Isa::kAvx2) isa = best_isa();
  selected().store(isa, std::memory_order_relaxed);
}

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::kBaseline: return "baseline";
    case Isa::kAvx2: return "avx2";
  }
  return "unknown";
}

namespace detail {

bool use_avx2() { return active_isa() == Isa::kAvx2; }

void bad_argument(const char* what, long long value) {
  throw common::caller_error(std::string("kernels: invalid ") + what + " " + std::to_string(value));
}

}  // namespace detail
}  // namespace ringlet::kernels::cpu
