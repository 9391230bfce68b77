#!/usr/bin/env bash
# The runtime's multi-rank tests under ThreadSanitizer: the background loop,
# the callers' threads, the process sets and the device collectives'
# finalizer share state through locks and handles, and a race there loses a
# gradient or hangs a job. Builds what the
# tests need into ./build-tsan (CUDA off: no device code is involved) and runs
# them; any report fails the run. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
flags="-fsanitize=thread -g"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRINGLET_WITH_CUDA=OFF -DRINGLET_WITH_NCCL=OFF -DRINGLET_WITH_PYTHON=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread"
cmake --build build-tsan --parallel "$(nproc)" --target ringletrun runtime_test process_set_test \
  runtime_fault_test runtime_fault_rank c_abi_async c_abi_process_sets c_abi_collectives_async \
  finalizer_test
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
# Not the jobs whose collectives run through MPI (HOROVOD_CPU_OPERATIONS=MPI):
# Debian's Open MPI is not built for ThreadSanitizer, which then reports its
# TCP transport's own two locks taken in both orders while MPI starts
# (mca_btl_tcp_add_procs, mca_btl_tcp_proc_remove), with no Ringlet lock held.
ctest --test-dir build-tsan --output-on-failure --timeout 600 \
  -R '^(runtime_np3|runtime_process_sets_np4|runtime_process_sets_two_hosts_np4|runtime_fault|api_c_abi_async_np3|api_c_abi_collectives_async_np3|api_process_sets_.*|Finalizer\..*)$' \
  -E '_mpi_ops_' "$@"
