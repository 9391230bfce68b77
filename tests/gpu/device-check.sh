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
# (RINGLET_ALGORITHM=ring), runs the job as users run it (one rank per GPU,
# a CUDA_VISIBLE_DEVICES or a host per rank, empty_cache() between
# collectives), runs SyncBatchNorm on CUDA inputs with 2 ranks (RING), trains
# pytorch_mnist.py on CUDA with 1 rank (NCCL) and 2 ranks (RING), runs
# ringlet.tensorflow on GPU tensors at 2 ranks (NCCL and RING; the op
# library's GPU kernels and the py_function path) where TensorFlow is
# installed, and prints one summary table. A target that fails to build fails its row, and the
# steps that need it are skipped; the others still run.
#
# What it measures (latency.txt): a 1-rank NCCL allreduce through the
# runtime beside ncclAllReduce alone (gpu_nccl_bare), p50 and p99 from 1 KiB
# to 1 MiB, with the largest gap; the 2-rank RING allreduce's p50 for each
# RINGLET_ALGORITHM (onestep, twoshot, direct, ring, auto) from 1 KiB to
# 1 MiB and at 256 MiB against the HBM bound, without and with CUDA MPS;
# and examples/pytorch_synthetic_benchmark.py (resnet50, batch 64, 1 rank,
# NCCL) beside the same loop in plain PyTorch
# (bench/python/plain_synthetic_benchmark.py). Where the time of a 1 KiB
# RING allreduce of 2 ranks goes (where.txt): each step's p50 and p90 from
# rank 0's timeline under direct, onestep and twoshot, and where Nsight
# Systems is on the machine, every CUDA call and kernel of one such run
# (nsys-stats.txt in the logs).
#
# It keeps within DEVICE_CHECK_SECONDS (400) from its start, build included:
# a step that would not fit in what is left is a SKIP row saying so. The
# steps run in order of what they tell: the kernels and the API first, then
# the measurements, then the wider rows. Every step's seconds are printed and
# listed in the summary. The summary, the bandwidth, latency and where
# tables and an archive of every log (logs.tar.gz) go to $OUT when set (five
# files, for runners that collect only a few) or to
# /tmp/ringlet-device-check.
#
# Exit status: 0 every check passed; 1 a wrong result or a failed step;
# 77 no CUDA device here.
set -uo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 1
results="${OUT:-/tmp/ringlet-device-check}"
work=/tmp/ringlet-device-check-work
out="$work/logs"
rm -rf "$work"
mkdir -p "$results" "$out"
build="$root/build-gpu"
deps=/tmp/ringlet-deps
started=$SECONDS
budget="${DEVICE_CHECK_SECONDS:-400}"

rows=()
failed=0
timings=()  # "step seconds", in order
# row NAME STATUS DETAIL; STATUS is PASS, FAIL, SKIP or INFO.
row() {
  rows+=("$1|$2|$3")
  [ "$2" = FAIL ] && failed=1
  printf '== %-34s %-5s %s\n' "$1" "$2" "$3"
}
summary() {
  echo
  echo "# Ringlet GPU check, $(date -u +%Y-%m-%dT%H:%MZ), $((SECONDS - started)) s of $budget"
  printf '%-36s %-5s %s\n' "check" "result" "detail"
  for r in "${rows[@]}"; do
    IFS='|' read -r name status detail <<<"$r"
    printf '%-36s %-5s %s\n' "$name" "$status" "$detail"
  done
  [ ${#timings[@]} -gt 0 ] && echo "# seconds per step: ${timings[*]}"
}
finish() {
  stop_mps
  summary | tee "$out/summary.txt"
  cp "$out/summary.txt" "$results/summary.txt"
  [ -f "$out/bandwidth.txt" ] && cp "$out/bandwidth.txt" "$results/bandwidth.txt"
  [ -f "$out/where.txt" ] && cp "$out/where.txt" "$results/where.txt"
  [ -f "$out/latency.txt" ] && cp "$out/latency.txt" "$results/latency.txt"
  tar czf "$results/logs.tar.gz" -C "$work" logs
  exit "$1"
}
# Seconds left of the budget.
left() { echo $((budget - (SECONDS - started))); }
# limit SECONDS: SECONDS, or what is left of the budget if less (at least 1).
limit() {
  local l
  l=$(left)
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -lt 1 ] && l=1
  echo "$l"
}
# step NAME NEEDS FUNCTION [ARG...]: runs FUNCTION unless fewer than NEEDS
# seconds are left (then a SKIP row), and prints and keeps its seconds.
step() {
  local name="$1" needs="$2" t
  shift 2
  if [ "$(left)" -lt "$needs" ]; then
    row "$name" SKIP "out of time: $(left) s left of $budget, the step takes about $needs"
    return
  fi
  t=$SECONDS
  "$@"
  echo "== step $name: $((SECONDS - t)) s ($(left) s left)"
  timings+=("$name=$((SECONDS - t))")
}

# CUDA MPS, while a step runs under it: its control daemon and the folders
# the ranks find it through. Stopped on every way out.
mps_dir=/tmp/ringlet-device-check-mps
mps_running=0
start_mps() {
  rm -rf "$mps_dir"
  mkdir -p "$mps_dir/pipe" "$mps_dir/log"
  export CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log"
  if ! nvidia-cuda-mps-control -d >"$out/mps-start.log" 2>&1; then
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    return 1
  fi
  mps_running=1
}
stop_mps() {
  [ "$mps_running" = 1 ] || return 0
  echo quit | nvidia-cuda-mps-control >>"$out/mps-start.log" 2>&1
  mps_running=0
  # The server leaves once its clients are gone; give it a moment.
  sleep 1
  cp -r "$mps_dir/log" "$out/mps-log" 2>/dev/null
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
trap 'stop_mps' EXIT
trap 'stop_mps; exit 1' INT TERM
# built TARGET: whether the build produced it.
built() {
  if [ "$1" = _ringlet ]; then
    ls "$build"/python/ringlet/_ringlet*.so >/dev/null 2>&1
  elif [ "$1" = ringlet_tf_ops ]; then
    [ -f "$build/python/ringlet/tensorflow/_ringlet_tf_ops.so" ]
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
  -DRINGLET_WITH_TENSORFLOW=AUTO)
targets=(kernels_test device_collectives_test gpu_kernel_bandwidth gpu_nccl_bare ringletrun
  ringlet-bench)
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
# The TensorFlow op library, where python3 imports TensorFlow here (its GPU
# kernels where that TensorFlow has CUDA).
if grep -q "TENSORFLOW=ON" "$out/configure.log"; then
  targets+=(ringlet_tf_ops)
fi
cmake --build "$build" --target "${targets[@]}" -- -k 0 >"$out/build.log" 2>&1
missing=()
for t in "${targets[@]}"; do built "$t" || missing+=("$t"); done
timings+=("build=$((SECONDS - t0))")
echo "== step build: $((SECONDS - t0)) s ($(left) s left)"
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
  timeout "$(limit 300)" "$build/bin/kernels_test" --gtest_filter='CudaKernelsTest.*' \
    >"$out/kernels_test.log" 2>&1
  gtest_row "kernels against the reference" "$out/kernels_test.log" $?
}

# --- device tensors through the public API (NCCL, one rank) -------------------
check_device_collectives() {
  skip_unless_built "device collectives (API, NCCL)" device_collectives_test || return
  t0=$SECONDS
  timeout "$(limit 300)" "$build/bin/device_collectives_test" >"$out/device_collectives_test.log" 2>&1
  # One test runs only where there is no device.
  gtest_row "device collectives (API, NCCL)" "$out/device_collectives_test.log" $? 1
}

# --- PyTorch on CUDA tensors: every collective, NCCL and RING ---------------------
check_torch() {
  if [ "$python_built" = 0 ]; then
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
  # The kernels that wait on each other: one-shot through the window, and
  # two-shot between the ranks' own buffers (every tensor of 1 byte or more).
  RINGLET_ALGORITHM=onestep torch_collectives "ringlet.torch np3 RING onestep" 3 RING \
    torch_cuda_ring3_onestep
  RINGLET_ALGORITHM=twoshot RINGLET_CUDA_IPC_DIRECT_BYTES=1 torch_collectives \
    "ringlet.torch np2 RING twoshot" 2 RING torch_cuda_ring2_twoshot
  sync_batch_norm "SyncBatchNorm np2 RING" 2 RING torch_sync_batch_norm_ring2
  mnist "pytorch_mnist.py on CUDA" 1 NCCL pytorch_mnist
  mnist "pytorch_mnist.py np2 RING" 2 RING pytorch_mnist_ring
}

torch_collectives() {  # NAME NP GPU_OPERATIONS LOG
  local name="$1" np="$2" ops="$3" log="$out/$4.log"
  HOROVOD_GPU_OPERATIONS="$ops" timeout "$(limit 300)" "$build/bin/ringletrun" -np "$np" \
    python3 tests/gpu/torch_collectives.py >"$log" 2>&1
  if [ "$(grep -c 'torch cuda collectives ok' "$log")" = "$np" ]; then
    row "$name" PASS "every collective, checked on the host"
  else
    tail -20 "$log"
    row "$name" FAIL "see $4.log"
  fi
}

sync_batch_norm() {  # NAME NP GPU_OPERATIONS LOG
  local name="$1" np="$2" ops="$3" log="$out/$4.log"
  HOROVOD_GPU_OPERATIONS="$ops" timeout "$(limit 120)" "$build/bin/ringletrun" -np "$np" \
    python3 tests/gpu/torch_sync_batch_norm.py >"$log" 2>&1
  if [ "$(grep -c 'torch cuda sync batch norm ok' "$log")" = "$np" ]; then
    row "$name" PASS "float32 and float16 against BatchNorm of the whole batch, on the device"
  else
    tail -20 "$log"
    row "$name" FAIL "see $4.log"
  fi
}

mnist() {  # NAME NP GPU_OPERATIONS LOG
  local name="$1" np="$2" ops="$3" log="$out/$4.log"
  if HOROVOD_GPU_OPERATIONS="$ops" timeout "$(limit 300)" "$build/bin/ringletrun" -np "$np" \
      python3 examples/pytorch_mnist.py --epochs 1 --max-steps 40 --check >"$log" 2>&1 &&
      grep -q "training on cuda" "$log"; then
    row "$name" PASS "$(grep -m1 -o 'loss [0-9.]* -> [0-9.]*' "$log")"
  else
    tail -20 "$log"
    row "$name" FAIL "see $4.log"
  fi
}

# --- TensorFlow on GPU tensors: eager, tf.function, Keras, NCCL and RING ---------
# tests/gpu/tensorflow_collectives.py at 2 ranks, each seeing one GPU; it checks
# every result on the host and that rank 0's timeline shows only device steps
# (NCCL_, CUDA_IPC_). This machine reaches no registry and .gpu-deps carries
# Debian packages only: TensorFlow is there or it is not, and without it the
# rows are SKIPs saying so.
check_tensorflow() {
  if [ "$python_built" = 0 ]; then
    row "ringlet.tensorflow on CUDA" SKIP "the Python binding was not configured here (see configure.log)"
    return
  fi
  skip_unless_built "ringlet.tensorflow on CUDA" _ringlet ringletrun || return
  if ! python3 -c "import tensorflow" >"$out/tensorflow-import.log" 2>&1; then
    row "ringlet.tensorflow on CUDA" SKIP "TensorFlow is not installed on this machine (python3 cannot import it: $(tail -1 "$out/tensorflow-import.log" | cut -c1-100)); it cannot be installed here without a network"
    return
  fi
  export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
  local kernels="the op library's GPU kernels"
  if ! built ringlet_tf_ops; then
    kernels="no op library (see configure.log and build.log): the py_function path"
  elif ! grep -q "RINGLET_TF_GPU" "$build/build.ninja" 2>/dev/null; then
    kernels="an op library without GPU kernels (this TensorFlow has no CUDA)"
  fi
  row "ringlet.tensorflow op library" INFO "$kernels"
  tf_collectives "ringlet.tensorflow np2 NCCL" NCCL 1 tensorflow_nccl
  tf_collectives "ringlet.tensorflow np2 RING" RING 1 tensorflow_ring
  tf_collectives "tensorflow py_function np2 NCCL" NCCL 0 tensorflow_pyfunc_nccl
  tf_collectives "tensorflow py_function np2 RING" RING 0 tensorflow_pyfunc_ring
}

tf_collectives() {  # NAME GPU_OPERATIONS RINGLET_TENSORFLOW_OPS LOG
  local name="$1" ops="$2" use_ops="$3" log="$out/$4.log" status
  HOROVOD_GPU_OPERATIONS="$ops" RINGLET_TENSORFLOW_OPS="$use_ops" TF_CPP_MIN_LOG_LEVEL=2 \
    RINGLET_TEST_TIMELINE="$out/$4-timeline.json" timeout "$(limit 150)" \
    "$build/bin/ringletrun" -np 2 python3 tests/gpu/tensorflow_collectives.py >"$log" 2>&1
  status=$?
  if [ "$(grep -c 'tensorflow gpu collectives ok' "$log")" = 2 ]; then
    row "$name" PASS "$(grep -m1 -o 'timeline: .*' "$log" | cut -c1-150)"
  elif [ $status -eq 77 ] || grep -q "SKIPPED:" "$log"; then
    # One rank per GPU for NCCL: a machine of one GPU runs only the RING rows.
    row "$name" SKIP "$(grep -m1 -o 'SKIPPED: .*' "$log" | cut -c10-160)"
  else
    tail -20 "$log"
    row "$name" FAIL "exit $status; see $4.log"
  fi
}

# --- bandwidth beside cudaMemcpy ------------------------------------------------
check_bandwidth() {
  skip_unless_built "kernel bandwidth" gpu_kernel_bandwidth || return
  if timeout "$(limit 120)" "$build/bin/gpu_kernel_bandwidth" --mib 64,256 --iters 20 \
      >"$out/bandwidth.txt" 2>&1; then
    cat "$out/bandwidth.txt"
    row "kernel bandwidth" INFO "$(grep -o '[0-9]* row(s) below [0-9]*% of the copy' "$out/bandwidth.txt") (bandwidth.txt)"
  else
    cat "$out/bandwidth.txt"
    row "kernel bandwidth" FAIL "see bandwidth.txt"
  fi
}

# --- GPU collectives through ringlet-bench --------------------------------------
# Each runs with checking on; a collective this version refuses by name is
# reported as not served, anything else that fails is a failure. The sizes
# and iterations are bench_flags' (set per call), within the budget.
default_flags=(-b 1K -e 16M -f 4 -c 1 -n 5 -w 2)
# bench LOG NP BACKEND COLLECTIVE [VARIABLE=VALUE ...]: one ringlet-bench run
# with bench_flags (default_flags when unset), its output in LOG; its status.
bench() {
  local log="$1" np="$2" backend="$3" coll="$4" flags
  shift 4
  read -ra flags <<<"${bench_flags:-${default_flags[*]}}"
  env "$@" timeout "$(limit 300)" "$build/bin/ringletrun" -np "$np" \
    "$build/bin/ringlet-bench" "$coll" --device cuda --backend "$backend" "${flags[@]}" \
    >"$log" 2>&1
}
# verdict LOG STATUS: "STATUS|detail" of a run: SKIP where this version
# refuses the collective by name, FAIL on a wrong element or a failed run.
verdict() {
  local log="$1" status="$2" name
  name="$(basename "$log" .log)"
  if grep -q "not served" "$log"; then
    echo "SKIP|$(grep -m1 -o '[^:]*not served[^(;]*' "$log" | head -1)"
  elif grep -Eq 'checked .*, [1-9][0-9]* wrong' "$log"; then
    echo "FAIL|wrong results; see $name.log"
  elif [ "$status" -ne 0 ]; then
    tail -20 "$log" >&2
    echo "FAIL|exit $status: $(grep -m1 -o 'ConfigError.*\|ringlet: .*' "$log" | cut -c1-120); see $name.log"
  else
    echo "PASS|$(grep -m1 'Avg bus bandwidth' "$log" | sed 's/.*: *//') GB/s average busbw"
  fi
}
collective() {  # NAME NP BACKEND COLLECTIVE [VARIABLE=VALUE ...: settings of this row]
  local name="$1" np="$2" backend="$3" coll="$4" log="$out/bench-$1.log" v
  shift 4
  skip_unless_built "$name" ringletrun ringlet-bench || return
  bench "$log" "$np" "$backend" "$coll" "$@"
  v="$(verdict "$log" $?)"
  row "$name" "${v%%|*}" "${v#*|}"
}

# column LOG BYTES FIELD: a field of the size's row in a ringlet-bench log
# (rank 0's table): 6 the mean time out of place, 14 p50 and 16 p99 out of
# place, 17 p50 and 19 p99 in place (us). Empty where there is none.
column() {
  sed 's/^\[[0-9]*\]<stdout>://' "$1" 2>/dev/null |
    awk -v b="$2" -v f="$3" '$1 == b && NF >= 19 {print $f; exit}'
}

# The 256 MiB allreduce of 2 ranks on the GPU (RING) against the least device
# memory traffic any allreduce needs: each rank's input read once and output
# written once, 2 x 2 x 256 MiB, at the cudaMemcpy bandwidth of this run
# (which counts bytes read plus written). The target is 70%; the rows of the
# staged path (through the window) and of the ring stand beside it.
bound_us() {
  local copy
  copy=$(awk '$1 == "cudaMemcpy" && $3 == 256 {print $5; exit}' "$out/bandwidth.txt" 2>/dev/null)
  [ -n "$copy" ] && awk -v c="$copy" 'BEGIN {printf "%.0f", 4 * 268435456 / (c * 1e9) * 1e6}'
}
hbm_bound() {  # NAME BENCH_LOG
  local name="$1" log="$out/bench-$2.log" copy us
  copy=$(awk '$1 == "cudaMemcpy" && $3 == 256 {print $5; exit}' "$out/bandwidth.txt" 2>/dev/null)
  us=$(column "$log" 268435456 6)
  if [ -z "$copy" ] || [ -z "$us" ]; then
    row "$name" SKIP "no copy bandwidth or no 256 MiB row to compare"
    return
  fi
  row "$name" INFO "$(awk -v c="$copy" -v t="$us" 'BEGIN {
    bound = 4 * 268435456 / (c * 1e9) * 1e6
    printf "%.0f us against a bound of %.0f us at %.0f GB/s: %.0f%% (target 70%%)", t, bound, c,
      100 * bound / t }')"
}

# --- NCCL through the runtime beside NCCL alone (1 rank) -------------------------
# The runtime's own cost: ringlet-bench's p50 at one rank against
# ncclAllReduce's launch and synchronize (gpu_nccl_bare), same device, same
# run. The target: within 15 us at every size up to 1 MiB.
small_sizes=(1024 4096 16384 65536 262144 1048576)
check_nccl_latency() {
  skip_unless_built "NCCL np1 runtime vs bare" gpu_nccl_bare ringletrun ringlet-bench || return
  local bare="$out/nccl-bare.txt" rt="$out/bench-nccl-allreduce-np1.log" v
  timeout "$(limit 120)" "$build/bin/gpu_nccl_bare" -b 1K -e 256M -f 4 -n 100 -w 10 >"$bare" 2>&1
  local bare_status=$?
  bench_flags="-b 1K -e 1M -f 4 -c 1 -n 100 -w 10" bench "$rt" 1 nccl allreduce
  v="$(verdict "$rt" $?)"
  # The runtime's run stands for the NCCL allreduce's row.
  row "nccl-allreduce-np1" "${v%%|*}" "${v#*|}"
  if [ $bare_status -ne 0 ]; then
    cat "$bare"
    row "NCCL np1 runtime vs bare" FAIL "gpu_nccl_bare exit $bare_status; see nccl-bare.txt"
    return
  fi
  {
    echo "# allreduce, 1 rank, float sum, NCCL: ncclAllReduce alone (gpu_nccl_bare: launch +"
    echo "# cudaStreamSynchronize) beside ringlet-bench --device cuda --backend nccl (submit to"
    echo "# handle complete); p50 and p99 over 100 ops, us; gap = runtime p50 - bare p50"
    printf '%10s %9s %9s %9s %9s %8s %9s %9s %8s\n' bytes bare_p50 bare_p99 rt_p50 rt_p99 gap \
      ip_bare ip_rt ip_gap
    for b in "${small_sizes[@]}"; do
      local line rp50 rp99 ip50
      line=$(awk -v b="$b" '$1 == b {print $2, $3, $4; exit}' "$bare")
      rp50=$(column "$rt" "$b" 14)
      rp99=$(column "$rt" "$b" 16)
      ip50=$(column "$rt" "$b" 17)
      echo "$b $line ${rp50:--} ${rp99:--} ${ip50:--}" | awk '{
        gap = ($5 == "-" || $2 == "") ? "-" : sprintf("%.2f", $5 - $2)
        ipgap = ($7 == "-" || $4 == "") ? "-" : sprintf("%.2f", $7 - $4)
        printf "%10s %9s %9s %9s %9s %8s %9s %9s %8s\n", $1, $2, $3, $5, $6, gap, $4, $7, ipgap }'
    done
    echo "# ncclAllReduce alone up to 256 MiB:"
    sed -n '/^ *bytes/,$p' "$bare"
  } >"$out/latency-nccl.txt"
  cat "$out/latency-nccl.txt"
  local worst
  worst=$(awk 'NF == 9 && $1 ~ /^[0-9]+$/ && $1 <= 1048576 && $6 != "-" {
      if (!seen || $6 > g) { g = $6; at = $1; seen = 1 }
      if ($9 != "-" && $9 > g) { g = $9; at = $1 " in place" } }
    END { if (seen) printf "%.1f us at %s bytes", g, at }' "$out/latency-nccl.txt")
  if [ -z "$worst" ]; then
    row "NCCL np1 runtime vs bare" FAIL "no runtime rows to compare; see bench-nccl-allreduce-np1.log"
  else
    row "NCCL np1 runtime vs bare" INFO "largest p50 gap up to 1 MiB: $worst (target 15 us; latency.txt)"
  fi
}

# --- the RING allreduce's latency per algorithm, 2 ranks sharing the GPU -------
# One column per RINGLET_ALGORITHM setting: p50 from 1 KiB to 1 MiB, and
# 256 MiB against the HBM bound. A setting this version refuses (a
# ConfigError naming RINGLET_ALGORITHM) fails its row; the table says so.
algorithms=(onestep twoshot direct ring auto)
# np2_name ALGORITHM SUFFIX: the rows' and logs' name; auto and ring keep
# the names these rows always had.
np2_name() {
  case "$1" in
    auto) echo "ring-allreduce-np2$2" ;;
    *) echo "ring-allreduce-np2-$1$2" ;;
  esac
}
latency_column() {  # ALGORITHM SUFFIX
  local algo="$1" suffix="$2" name small big vs vb setting=()
  name="$(np2_name "$algo" "$suffix")"
  skip_unless_built "$name" ringletrun ringlet-bench || return
  [ "$algo" != auto ] && setting=("RINGLET_ALGORITHM=$algo")
  small="$out/bench-$name.log"
  big="$out/bench-$name-256M.log"
  bench_flags="-b 1K -e 1M -f 4 -c 1 -n 50 -w 5" bench "$small" 2 ring allreduce "${setting[@]}"
  vs="$(verdict "$small" $?)"
  if [ "${vs%%|*}" = PASS ]; then
    bench_flags="-b 256M -e 256M -c 1 -n 3 -w 1" bench "$big" 2 ring allreduce "${setting[@]}"
    vb="$(verdict "$big" $?)"
  else
    vb="$vs"
  fi
  if [ "${vs%%|*}" != PASS ]; then
    row "$name" "${vs%%|*}" "${vs#*|}"
  elif [ "${vb%%|*}" != PASS ]; then
    row "$name" "${vb%%|*}" "256 MiB: ${vb#*|}"
  else
    row "$name" PASS "p50 $(column "$small" 1024 14) us at 1 KiB, $(column "$small" 1048576 14) us at 1 MiB, $(column "$big" 268435456 14) us at 256 MiB"
  fi
}
check_np2_latency() {  # SUFFIX
  for a in "${algorithms[@]}"; do latency_column "$a" "$1"; done
}
# latency_table TITLE SUFFIX: the p50 table of check_np2_latency's logs.
latency_table() {
  local suffix="$2" bound a log cell
  bound=$(bound_us)
  echo "# $1"
  echo "# allreduce p50 us (out of place), float sum, 2 ranks sharing the GPU, HOROVOD_GPU_OPERATIONS=RING"
  printf '%10s' bytes
  for a in "${algorithms[@]}"; do printf ' %14s' "$a"; done
  echo
  for b in "${small_sizes[@]}" 268435456; do
    printf '%10s' "$b"
    for a in "${algorithms[@]}"; do
      log="$out/bench-$(np2_name "$a" "$suffix").log"
      [ "$b" = 268435456 ] && log="${log%.log}-256M.log"
      cell=$(column "$log" "$b" 14)
      if [ -z "$cell" ]; then
        cell=$([ -f "$log" ] && echo FAIL || echo -)
      elif [ "$b" = 268435456 ] && [ -n "$bound" ]; then
        cell="$cell($(awk -v t="$cell" -v bd="$bound" 'BEGIN {printf "%.0f%%", 100 * bd / t}'))"
      fi
      printf ' %14s' "$cell"
    done
    echo
  done
  [ -n "$bound" ] && echo "# 256 MiB: (%) the HBM bound, ${bound} us (4 x 256 MiB at the copy's bandwidth), over the p50"
  echo
}

# The same rows under CUDA MPS, where the machine has it: the two ranks'
# kernels then share the GPU at once instead of by time slices.
check_np2_latency_mps() {
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    row "RING np2 under MPS" SKIP "nvidia-cuda-mps-control is not on this machine"
    return
  fi
  if ! start_mps; then
    row "RING np2 under MPS" FAIL "nvidia-cuda-mps-control -d failed: $(tail -1 "$out/mps-start.log")"
    return
  fi
  check_np2_latency -mps
  stop_mps
  mps_ran=1
}
mps_ran=0

# --- the synthetic benchmark beside plain PyTorch ----------------------------------
# examples/pytorch_synthetic_benchmark.py at 1 rank on NCCL against the same
# loop with no communication library, the same batches, one after the other.
check_synthetic() {
  local name="synthetic resnet50 np1 vs plain"
  if [ "$python_built" = 0 ]; then
    row "$name" SKIP "the Python binding was not configured here (see configure.log)"
    return
  fi
  skip_unless_built "$name" _ringlet ringletrun || return
  if ! python3 -c "import torchvision" >"$out/torchvision.log" 2>&1; then
    row "$name" SKIP "torchvision is missing: python3 cannot import it ($(tail -1 "$out/torchvision.log"))"
    return
  fi
  local flags=(--model resnet50 --batch-size 64 --num-warmup-batches 10 --num-batches-per-iter 10
    --num-iters 5)
  local plain="$out/synthetic-plain.log" ours="$out/synthetic-np1.log" p r
  timeout "$(limit 150)" python3 bench/python/plain_synthetic_benchmark.py "${flags[@]}" >"$plain" 2>&1
  PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" HOROVOD_GPU_OPERATIONS=NCCL \
    timeout "$(limit 150)" "$build/bin/ringletrun" -np 1 \
    python3 examples/pytorch_synthetic_benchmark.py "${flags[@]}" >"$ours" 2>&1
  p=$(grep -o 'Img/sec per CUDA: [0-9.]*' "$plain" | grep -o '[0-9.]*$')
  r=$(grep -o 'Img/sec per CUDA: [0-9.]*' "$ours" | grep -o '[0-9.]*$')
  if [ -z "$p" ] || [ -z "$r" ]; then
    tail -20 "$plain" "$ours"
    row "$name" FAIL "no CUDA rate from $([ -z "$p" ] && echo synthetic-plain.log) $([ -z "$r" ] && echo synthetic-np1.log)"
    return
  fi
  row "$name" INFO "$(awk -v r="$r" -v p="$p" 'BEGIN {
    printf "%.1f img/s through ringlet.torch, %.1f plain: %.1f%% (target 97%%)", r, p, 100 * r / p }')"
}

# --- where the time of a RING collective goes ------------------------------------
# A 1 KiB allreduce of 2 ranks on the GPU under three algorithms, with rank 0's
# timeline: each step's p50 and p90 (tools/timeline-phases.py; the device
# steps as the finalizer sees the device reach them). Where Nsight Systems is
# on the machine, one run under it too: every CUDA call's time on the host and
# every kernel's on the device (nsys-stats.txt).
check_where_time_goes() {
  skip_unless_built "where the time goes" ringletrun ringlet-bench || return
  local algo log phases
  for algo in direct onestep twoshot; do
    log="$out/timeline-$algo"
    bench_flags="-b 1K -e 1K -c 1 -n 200 -w 20" bench "$log.log" 2 ring allreduce \
      "RINGLET_ALGORITHM=$algo" "HOROVOD_TIMELINE=$log.json"
    phases="$out/phases-$algo.txt"
    if python3 tools/timeline-phases.py "$log.json" --skip 20 >"$phases" 2>&1; then
      echo "# RING np2 1 KiB allreduce, RINGLET_ALGORITHM=$algo (us)" >>"$out/where.txt"
      cat "$phases" >>"$out/where.txt"
      echo >>"$out/where.txt"
      row "where the time goes: $algo" INFO "$(awk '$1 == "ALLREDUCE" || $1 == "WAIT_FOR_DATA" ||
        $1 ~ /^CUDA_IPC/ {printf "%s p50 %s; ", $1, $3}' "$phases")(where.txt)"
    else
      row "where the time goes: $algo" FAIL "no timeline summary; see timeline-$algo.log"
    fi
  done
  if ! command -v nsys >/dev/null; then
    row "nsys capture" SKIP "Nsight Systems (nsys) is not on this machine"
    return
  fi
  timeout "$(limit 90)" nsys profile --trace=cuda,nvtx,osrt --stats=false --force-overwrite=true \
    -o "$out/nsys-direct" "$build/bin/ringletrun" -np 2 "$build/bin/ringlet-bench" allreduce \
    --device cuda --backend ring -b 1K -e 1K -c 1 -n 200 -w 20 >"$out/nsys.log" 2>&1
  if nsys stats --report cuda_api_sum,cuda_gpu_kern_sum,nvtx_sum --format table \
      "$out/nsys-direct.nsys-rep" >"$out/nsys-stats.txt" 2>&1; then
    row "nsys capture" INFO "CUDA calls, kernels and NVTX ranges of a 1 KiB np2 run (nsys-stats.txt)"
  else
    row "nsys capture" FAIL "see nsys.log and nsys-stats.txt"
  fi
  rm -f "$out/nsys-direct.nsys-rep" "$out/nsys-direct.sqlite"
}

# --- The GPU job as users run it: one rank per GPU ------------------------------
# Each rank on local_rank % GPUs: its own GPU where the machine has two or
# more (else the rows that need two say so). Every result on its input's
# device, the current device unchanged, empty_cache() between RING
# collectives, a context on one GPU per process; a CUDA_VISIBLE_DEVICES of
# its own per rank (the window then stages through host memory: the GPUs
# cannot see each other), and a host of its own per rank (RINGLET_HOSTNAME:
# the cross-host device path).
check_own_gpus() {
  if [ "$python_built" = 0 ]; then
    row "own GPUs" SKIP "the Python binding was not configured here (see configure.log)"
    return
  fi
  skip_unless_built "own GPUs" _ringlet ringletrun || return
  export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
  local gpus
  gpus="$(nvidia-smi --list-gpus 2>/dev/null | grep -c '^GPU')"
  own_gpu_row "RING np2, empty_cache between steps" 2 RING own_ring_empty_cache "" \
    --empty-cache
  RINGLET_CUDA_IPC_DIRECT_BYTES=1 own_gpu_row "RING np2 own buffers, empty_cache" 2 RING \
    own_ring_direct_empty_cache "" --empty-cache
  own_gpu_row "RING np2, a host per rank" 2 RING own_ring_hosts 'RINGLET_HOSTNAME=h$RINGLET_RANK'
  if [ "$gpus" -lt 2 ]; then
    for name in "NCCL np2 one rank per GPU" "RING np2 one rank per GPU" \
        "NCCL np2 CUDA_VISIBLE_DEVICES per rank" "RING np2 CUDA_VISIBLE_DEVICES per rank"; do
      row "$name" SKIP "this machine has $gpus GPU: one rank per GPU needs two"
    done
    return
  fi
  own_gpu_row "NCCL np2 one rank per GPU" 2 NCCL own_nccl ""
  own_gpu_row "RING np2 one rank per GPU" 2 RING own_ring ""
  own_gpu_row "RING np${gpus} one rank per GPU" "$gpus" RING own_ring_all ""
  own_gpu_row "NCCL np2 CUDA_VISIBLE_DEVICES per rank" 2 NCCL own_nccl_visible \
    'CUDA_VISIBLE_DEVICES=$RINGLET_LOCAL_RANK'
  own_gpu_row "RING np2 CUDA_VISIBLE_DEVICES per rank" 2 RING own_ring_visible \
    'CUDA_VISIBLE_DEVICES=$RINGLET_LOCAL_RANK'
}

own_gpu_row() {  # NAME NP GPU_OPERATIONS LOG RANK_ENV [ARGS...]
  local name="$1" np="$2" ops="$3" log="$out/$4.log" rank_env="$5"
  shift 5
  HOROVOD_GPU_OPERATIONS="$ops" timeout "$(limit 120)" "$build/bin/ringletrun" -np "$np" \
    sh -c "$rank_env exec python3 tests/gpu/own_gpu_check.py $*" >"$log" 2>&1
  if [ "$(grep -c 'own gpu ok' "$log")" = "$np" ]; then
    row "$name" PASS "$(grep -m1 -o 'contexts: .*' "$log")"
  else
    tail -20 "$log"
    row "$name" FAIL "see $4.log"
  fi
}

check_rest() {
  if built ringletrun; then
    "$build/bin/ringletrun" --check-build >"$out/check-build.txt" 2>&1
    sed -n '/GPU:/,/^$/p' "$out/check-build.txt"
  fi
  collective nccl-broadcast-np1 1 nccl broadcast
  collective nccl-allgather-np1 1 nccl allgather
  # The window's own path at the sizes the direct one takes (4 MiB and up).
  bench_flags="-b 16M -e 256M -f 4 -c 1 -n 3 -w 1" collective ring-allreduce-np2-staged 2 ring \
    allreduce RINGLET_CUDA_IPC_DIRECT_BYTES=0
  collective ring-allreduce-np3-ring 3 ring allreduce RINGLET_ALGORITHM=ring
  collective ring-broadcast-np2 2 ring broadcast
  collective ring-allgather-np2 2 ring allgather
  collective ring-reducescatter-np2 2 ring reducescatter
  collective ring-alltoall-np2 2 ring alltoall
  collective ring-allreduce-np4 4 ring allreduce
  collective ring-broadcast-np4 4 ring broadcast
  collective ring-allgather-np4 4 ring allgather
}

# In order of what they tell; the second number is about what each takes
# (a run of ringletrun starts in 1 to 2 s; a 256 MiB op is mostly the
# host's filling and copying of its buffers, untimed).
step kernels 20 check_kernels
step device-collectives 15 check_device_collectives
step own-gpus 45 check_own_gpus
step bandwidth 10 check_bandwidth
step nccl-latency 15 check_nccl_latency
step np2-latency 40 check_np2_latency ""
step synthetic 30 check_synthetic
step np2-latency-mps 40 check_np2_latency_mps
step where-time-goes 30 check_where_time_goes
step torch 90 check_torch
step tensorflow 90 check_tensorflow
step collectives 30 check_rest
hbm_bound "RING 256 MiB np2 vs HBM" ring-allreduce-np2-256M
hbm_bound "RING 256 MiB np2 staged vs HBM" ring-allreduce-np2-staged
hbm_bound "RING 256 MiB np2 ring vs HBM" ring-allreduce-np2-ring-256M
{
  [ -f "$out/latency-nccl.txt" ] && cat "$out/latency-nccl.txt" && echo
  latency_table "without MPS" ""
  [ $mps_ran = 1 ] && latency_table "under CUDA MPS" -mps
} >"$out/latency.txt"
cat "$out/latency.txt"

finish $failed
