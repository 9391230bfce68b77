#!/usr/bin/env bash
# The one prepared check for a lent GPU machine, run there from the repository
# root with .gpu-deps/ carried (tests/gpu/fetch-deps.sh fills it here, where
# Debian's registry is reachable):
#
#   tests/gpu/device-check.sh
#
# That machine has nvcc, CMake, ninja, Python with PyTorch and NCCL's wheel,
# and none of our Debian packages: they are unpacked from .gpu-deps/ into a
# private prefix (never into /). It then builds in build-gpu/ for the local
# GPU's architecture, checks every CUDA kernel against the scalar reference
# (odd sizes, misaligned pointers, every dtype and op), measures the kernels
# beside a device-to-device cudaMemcpy, runs every collective of device
# tensors through the public API, ringlet.torch and ringlet-bench (NCCL, one
# rank: NCCL runs one rank per device and the machine has one), runs Ringlet's
# own algorithms over CUDA IPC (HOROVOD_GPU_OPERATIONS=RING) with 2 to 4
# ranks sharing the GPU, through the window and between the ranks' own
# buffers (RINGLET_CUDA_IPC_DIRECT_BYTES 0, 4M and 1) and as a ring
# (RINGLET_ALGORITHM=ring), trains pytorch_mnist.py on CUDA with 1 rank (NCCL)
# and 2 ranks (RING), and prints one summary table. A target that fails to build fails its row, and the
# steps that need it are skipped; the others still run. The summary, the
# bandwidth table and an archive of every log (logs.tar.gz) go to $OUT when
# set (three files, for runners that collect only a few) or to
# /tmp/ringlet-device-check.
#
# Exit status: 0 every check passed; 1 a wrong result or a failed step;
# 77 no CUDA device here.
set -uo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
results="${OUT:-/tmp/ringlet-device-check}"
work=/tmp/ringlet-device-check-work
out="$work/logs"
rm -rf "$work"
mkdir -p "$results" "$out"
build="$root/build-gpu"
deps=/tmp/ringlet-deps
started=$SECONDS

rows=()
failed=0
# row NAME STATUS DETAIL; STATUS is PASS, FAIL, SKIP or INFO.
row() {
  rows+=("$1|$2|$3")
  [ "$2" = FAIL ] && failed=1
  printf '== %-34s %-5s %s\n' "$1" "$2" "$3"
}
summary() {
  echo
  echo "# Ringlet GPU check, $(date -u +%Y-%m-%dT%H:%MZ), $((SECONDS - started)) s"
  printf '%-36s %-5s %s\n' "check" "result" "detail"
  for r in "${rows[@]}"; do
    IFS='|' read -r name status detail <<<"$r"
    printf '%-36s %-5s %s\n' "$name" "$status" "$detail"
  done
}
finish() {
  summary | tee "$out/summary.txt"
  cp "$out/summary.txt" "$results/summary.txt"
  [ -f "$out/bandwidth.txt" ] && cp "$out/bandwidth.txt" "$results/bandwidth.txt"
  tar czf "$results/logs.tar.gz" -C "$work" logs
  exit "$1"
}
# built TARGET: whether the build produced it.
built() {
  if [ "$1" = _ringlet ]; then
    ls "$build"/python/ringlet/_ringlet*.so >/dev/null 2>&1
  else
    [ -x "$build/bin/$1" ]
  fi
}

# --- the machine -------------------------------------------------------------
gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
if [ -z "$gpu" ]; then
  row "CUDA device" SKIP "no CUDA device: nvidia-smi lists none"
  finish 77
fi
row "CUDA device" INFO "$gpu"
row "nvcc" INFO "$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)"
arch="${RINGLET_CUDA_ARCHITECTURES:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')}"

# --- dependencies: the carried Debian packages, NCCL from its wheel ----------
if ! ls .gpu-deps/*.deb >/dev/null 2>&1; then
  row "dependencies" FAIL ".gpu-deps/*.deb missing: run tests/gpu/fetch-deps.sh here and carry .gpu-deps"
  finish 1
fi
rm -rf "$deps"
mkdir -p "$deps"
for f in .gpu-deps/*.deb; do dpkg -x "$f" "$deps"; done
prefix="$deps/usr"
libdir="$prefix/lib/x86_64-linux-gnu"
# Debian's pkg-config files name /usr as their prefix; CMake would find them
# through CMAKE_PREFIX_PATH and then look for the headers in the wrong place.
sed -i "s|^prefix=/usr\$|prefix=$prefix|" "$libdir"/pkgconfig/*.pc "$prefix"/share/pkgconfig/*.pc
# OpenSSL's configuration.h lives under the multiarch include folder, which the
# compilers search only under /usr.
export CPATH="$prefix/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
nccl_dir="$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0] if s else "")' 2>/dev/null)"
nccl_args=(-DRINGLET_WITH_NCCL=AUTO)
if [ -n "$nccl_dir" ] && [ -f "$nccl_dir/include/nccl.h" ]; then
  nccl_lib="$(ls "$nccl_dir"/lib/libnccl.so* 2>/dev/null | head -1)"
  nccl_args=(-DRINGLET_WITH_NCCL=ON "-DNCCL_INCLUDE_DIR=$nccl_dir/include" "-DNCCL_LIBRARY=$nccl_lib")
  export LD_LIBRARY_PATH="$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
row "dependencies" INFO "$(ls .gpu-deps/*.deb | wc -l) Debian packages; NCCL ${nccl_dir:-from the CUDA toolkit}"

# --- build -------------------------------------------------------------------
configure=(cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
  "-DCMAKE_PREFIX_PATH=$prefix" "-DOPENSSL_ROOT_DIR=$prefix"
  "-DCMAKE_CUDA_ARCHITECTURES=$arch" -DRINGLET_WITH_CUDA=ON "${nccl_args[@]}"
  -DRINGLET_WITH_UCX=OFF -DRINGLET_WITH_MPI=OFF -DRINGLET_WITH_PYTHON=AUTO
  -DRINGLET_WITH_TENSORFLOW=OFF)
targets=(kernels_test device_collectives_test gpu_kernel_bandwidth ringletrun ringlet-bench)
t0=$SECONDS
if ! "${configure[@]}" >"$out/configure.log" 2>&1; then
  tail -30 "$out/configure.log"
  row "configure" FAIL "see configure.log"
  finish 1
fi
python_built=0
if grep -q "PYTHON=ON" "$out/configure.log"; then
  python_built=1
  targets+=(_ringlet)
fi
cmake --build "$build" --target "${targets[@]}" -- -k 0 >"$out/build.log" 2>&1
missing=()
for t in "${targets[@]}"; do built "$t" || missing+=("$t"); done
if [ ${#missing[@]} -eq 0 ]; then
  row "build (sm_$arch)" PASS "$((SECONDS - t0)) s: ${targets[*]}"
else
  grep -E "error|FAILED" "$out/build.log" | head -30
  row "build (sm_$arch)" FAIL "not built: ${missing[*]} (see build.log); the steps needing them are skipped"
fi
# skip_unless_built ROW TARGET...: false (and a SKIP row) unless all were built.
skip_unless_built() {
  local name="$1"
  shift
  for t in "$@"; do
    if ! built "$t"; then
      row "$name" SKIP "$t was not built"
      return 1
    fi
  done
}

# gtest_row NAME LOG STATUS [ALLOWED_SKIPS]: one row from a GoogleTest run. A
# test skipped on a machine with a GPU is a fault, beyond ALLOWED_SKIPS (tests
# that run only where there is no device).
gtest_row() {
  local name="$1" log="$2" status="$3" allowed="${4:-0}" passed skipped
  passed="$(grep -o '\[  PASSED  \] [0-9]* test' "$log" | grep -o '[0-9]*' | tail -1)"
  skipped="$(grep -o '\[  SKIPPED \] [0-9]* test' "$log" | grep -o '[0-9]*' | tail -1)"
  if [ "$status" -ne 0 ]; then
    grep -B2 -A8 "Failure\|FAILED\|what()" "$log" | head -60
    row "$name" FAIL "exit $status; see $(basename "$log")"
  elif [ -n "$skipped" ] && [ "$skipped" -gt "$allowed" ]; then
    row "$name" FAIL "$skipped skipped on a machine with a GPU: $(grep -m1 -o 'no CUDA device.*' "$log")"
  else
    row "$name" PASS "${passed:-0} tests, $((SECONDS - t0)) s"
  fi
}

# --- every kernel against the scalar reference --------------------------------
check_kernels() {
  skip_unless_built "kernels against the reference" kernels_test || return
  t0=$SECONDS
  "$build/bin/kernels_test" --gtest_filter='CudaKernelsTest.*' >"$out/kernels_test.log" 2>&1
  gtest_row "kernels against the reference" "$out/kernels_test.log" $?
}

# --- device tensors through the public API (NCCL, one rank) -------------------
check_device_collectives() {
  skip_unless_built "device collectives (API, NCCL)" device_collectives_test || return
  t0=$SECONDS
  "$build/bin/device_collectives_test" >"$out/device_collectives_test.log" 2>&1
  # One test runs only where there is no device.
  gtest_row "device collectives (API, NCCL)" "$out/device_collectives_test.log" $? 1
}

# --- PyTorch on CUDA tensors: every collective, NCCL and RING ---------------------
check_torch() {
  if [ $python_built = 0 ]; then
    row "ringlet.torch on CUDA" SKIP "the Python binding was not configured here (see configure.log)"
    return
  fi
  skip_unless_built "ringlet.torch on CUDA" _ringlet ringletrun || return
  export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
  torch_collectives "ringlet.torch on CUDA (NCCL)" 1 NCCL torch_cuda
  torch_collectives "ringlet.torch np2 RING" 2 RING torch_cuda_ring2
  RINGLET_CUDA_IPC_DIRECT_BYTES=1 torch_collectives "ringlet.torch np4 RING direct" 4 RING \
    torch_cuda_ring4_direct
  RINGLET_ALGORITHM=ring torch_collectives "ringlet.torch np3 RING ring" 3 RING torch_cuda_ring3_ring
  mnist "pytorch_mnist.py on CUDA" 1 NCCL pytorch_mnist
  mnist "pytorch_mnist.py np2 RING" 2 RING pytorch_mnist_ring
}

torch_collectives() {  # NAME NP GPU_OPERATIONS LOG
  local name="$1" np="$2" ops="$3" log="$out/$4.log"
  HOROVOD_GPU_OPERATIONS="$ops" timeout 300 "$build/bin/ringletrun" -np "$np" \
    python3 tests/gpu/torch_collectives.py >"$log" 2>&1
  if [ "$(grep -c 'torch cuda collectives ok' "$log")" = "$np" ]; then
    row "$name" PASS "every collective, checked on the host"
  else
    tail -20 "$log"
    row "$name" FAIL "see $4.log"
  fi
}

mnist() {  # NAME NP GPU_OPERATIONS LOG
  local name="$1" np="$2" ops="$3" log="$out/$4.log"
  if HOROVOD_GPU_OPERATIONS="$ops" timeout 300 "$build/bin/ringletrun" -np "$np" \
      python3 examples/pytorch_mnist.py --epochs 1 --max-steps 40 --check >"$log" 2>&1 &&
      grep -q "training on cuda" "$log"; then
    row "$name" PASS "$(grep -m1 -o 'loss [0-9.]* -> [0-9.]*' "$log")"
  else
    tail -20 "$log"
    row "$name" FAIL "see $4.log"
  fi
}

# --- bandwidth beside cudaMemcpy ------------------------------------------------
check_bandwidth() {
  skip_unless_built "kernel bandwidth" gpu_kernel_bandwidth || return
  if "$build/bin/gpu_kernel_bandwidth" --mib 64,256 --iters 20 >"$out/bandwidth.txt" 2>&1; then
    cat "$out/bandwidth.txt"
    row "kernel bandwidth" INFO "$(grep -o '[0-9]* row(s) below [0-9]*% of the copy' "$out/bandwidth.txt") (bandwidth.txt)"
  else
    cat "$out/bandwidth.txt"
    row "kernel bandwidth" FAIL "see bandwidth.txt"
  fi
}

# --- GPU collectives through ringlet-bench --------------------------------------
# Each runs with checking on; a collective this version refuses by name is
# reported as not served, anything else that fails is a failure.
collective() {  # NAME NP BACKEND COLLECTIVE [VARIABLE=VALUE ...: settings of this row]
  local name="$1" np="$2" backend="$3" coll="$4" log="$out/bench-$1.log"
  shift 4
  skip_unless_built "$name" ringletrun ringlet-bench || return
  env "$@" timeout 300 "$build/bin/ringletrun" -np "$np" \
    "$build/bin/ringlet-bench" "$coll" --device cuda \
    --backend "$backend" -b 1K -e 256M -f 4 -c 1 -n 20 -w 5 >"$log" 2>&1
  local status=$?
  if grep -q "not served" "$log"; then
    row "$name" SKIP "$(grep -m1 -o '[^:]*not served[^(;]*' "$log" | head -1)"
  elif grep -Eq 'checked .*, [1-9][0-9]* wrong' "$log"; then
    row "$name" FAIL "wrong results; see bench-$name.log"
  elif [ $status -ne 0 ]; then
    tail -20 "$log"
    row "$name" FAIL "exit $status; see bench-$name.log"
  else
    row "$name" PASS "$(grep -m1 'Avg bus bandwidth' "$log" | sed 's/.*: *//') GB/s average busbw"
  fi
}

# The 256 MiB allreduce of 2 ranks on the GPU (RING) against the least device
# memory traffic any allreduce needs: each rank's input read once and output
# written once, 2 x 2 x 256 MiB, at the cudaMemcpy bandwidth of this run
# (which counts bytes read plus written). The target is 70%; the rows of the
# staged path (through the window) and of the ring stand beside it.
hbm_bound() {  # NAME BENCH_LOG
  local name="$1" log="$out/bench-$2.log" copy us
  copy=$(awk '$1 == "cudaMemcpy" && $3 == 256 {print $5; exit}' "$out/bandwidth.txt" 2>/dev/null)
  us=$(sed 's/^\[[0-9]*\]<stdout>://' "$log" 2>/dev/null | awk '$1 == 268435456 {print $6; exit}')
  if [ -z "$copy" ] || [ -z "$us" ]; then
    row "$name" SKIP "no copy bandwidth or no 256 MiB row to compare"
    return
  fi
  row "$name" INFO "$(awk -v c="$copy" -v t="$us" 'BEGIN {
    bound = 4 * 268435456 / (c * 1e9) * 1e6
    printf "%.0f us against a bound of %.0f us at %.0f GB/s: %.0f%% (target 70%%)", t, bound, c,
      100 * bound / t }')"
}

check_kernels
check_device_collectives
check_torch
check_bandwidth
if built ringletrun; then
  "$build/bin/ringletrun" --check-build >"$out/check-build.txt" 2>&1
  sed -n '/GPU:/,/^$/p' "$out/check-build.txt"
fi
collective nccl-allreduce-np1 1 nccl allreduce
collective nccl-broadcast-np1 1 nccl broadcast
collective nccl-allgather-np1 1 nccl allgather
collective ring-allreduce-np2 2 ring allreduce
collective ring-allreduce-np2-staged 2 ring allreduce RINGLET_CUDA_IPC_DIRECT_BYTES=0
collective ring-allreduce-np2-ring 2 ring allreduce RINGLET_ALGORITHM=ring
collective ring-allreduce-np3-ring 3 ring allreduce RINGLET_ALGORITHM=ring
collective ring-broadcast-np2 2 ring broadcast
collective ring-allgather-np2 2 ring allgather
collective ring-reducescatter-np2 2 ring reducescatter
collective ring-alltoall-np2 2 ring alltoall
collective ring-allreduce-np4 4 ring allreduce
collective ring-broadcast-np4 4 ring broadcast
collective ring-allgather-np4 4 ring allgather
hbm_bound "RING 256 MiB np2 vs HBM" ring-allreduce-np2
hbm_bound "RING 256 MiB np2 staged vs HBM" ring-allreduce-np2-staged
hbm_bound "RING 256 MiB np2 ring vs HBM" ring-allreduce-np2-ring

finish $failed
