#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer:
# out-of-bounds and use-after-free in the buffers the kernels and carriers
# touch, leaks, misaligned or out-of-range loads (an optimiser may exploit
# any of them). Builds everything into ./build-asan (CUDA and NCCL off: no
# device code runs on the host; the Python binding off: an uninstrumented
# python3 cannot load an instrumented extension, the ASan runtime must come
# first; every other option as in the default build)
# and runs every test there; any report fails the run. Extra arguments go to
# ctest.
#
# Cost, cold (no ccache), on two cores: about 25 CPU-minutes to build at -O2
# (the instrumentation, not the headers, is the cost: a unity build saves
# little), a third less at -O1, which is what ASan's own documentation
# recommends; then about 8 min to run the tests at -j2. CI runs it after the
# test suite; the knobs below keep it within CI's budget.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
./tools/install-deps.sh

# Reports stop the process with an exit status of their own (67: ASan or
# LeakSanitizer, 68: UBSan), so a test that expects some other failure
# cannot mistake a report for it. The options are exported before the build
# because gtest_discover_tests runs every test binary as it is linked.
# fast_unwind_on_malloc=0: hwloc, Open MPI and UCX are built without frame
# pointers, and the fast unwinder stops inside them before the frame that
# names the library, so a by-library suppression would not match.
export ASAN_OPTIONS="halt_on_error=1 exitcode=67 detect_leaks=1 print_stacktrace=1 \
strict_string_checks=1 check_initialization_order=1 fast_unwind_on_malloc=0 \
${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1 exitcode=68 print_stacktrace=1 ${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/tools/sanitizers/lsan.supp ${LSAN_OPTIONS:-}"
# Open MPI and PMIx unload their plugins at MPI_Finalize, and a leak from an
# unloaded plugin has no library name left to suppress it by: keep them
# loaded (the MCA parameter made for memory checkers).
export OMPI_MCA_mca_base_component_disable_dlclose=1
export PMIX_MCA_mca_base_component_disable_dlclose=1

# -g1: line tables and function names, all a report's stack trace needs;
# full debug info (-g) makes every object twice as large and the cold build
# about 15% slower. The build type's own flags would add -g back.
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g1"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DRINGLET_WITH_CUDA=OFF -DRINGLET_WITH_NCCL=OFF -DRINGLET_WITH_PYTHON=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build build-asan --parallel "$(nproc)"

# Three labels stay out, for reasons of their own:
# - large: more than 2^31 elements at np=2, about 9 GB of buffers. Under ASan
#   every element access is checked and the shadow memory adds to the 9 GB,
#   more time and memory than a shared CI machine has for one test; the
#   default build runs it.
# - install: installs the library and builds a consumer of it with the plain
#   compiler; an uninstrumented program cannot load an ASan-instrumented
#   library (the runtime must come first), and the default build runs it.
# - soak: 30 s of fixed-length random runs (37 s under ASan, measured);
#   CI runs tools/soak.sh on its own right after, longer. The fuzz label
#   stays: replaying the saved regressions under ASan costs under a second.
# And the five-rank collectives (about 60 s each under ASan, the largest
# tests there): the code they run is the two- to four-rank tests' with one
# rank more, and the default build runs them.
if ! ctest --test-dir build-asan --output-on-failure --timeout 900 \
  -LE '^(large|install|soak)$' -E '^collectives_np5_' "$@"; then
  # A test whose only failure is LeakSanitizer's own crash (its tracer, at
  # exit, under load: tools/sanitizers/lsan_crashed.py) runs once more; any
  # other failure fails the run.
  python3 tools/sanitizers/lsan_crashed.py build-asan/Testing/Temporary/LastTest.log
  ctest --test-dir build-asan --output-on-failure --timeout 900 --rerun-failed
fi
