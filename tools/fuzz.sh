#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for a bounded time each.
#
#   tools/fuzz.sh [SECONDS-PER-TARGET] [TARGET...]
#
# Builds the targets with clang into ./build-fuzz (AddressSanitizer and
# UndefinedBehaviorSanitizer, nothing else of the project), then runs each
# from its seed corpus (tests/fuzz/corpus/<target>/, read only: what the
# fuzzer learns goes to build-fuzz/corpus/<target>/). The default of 40 s per
# target keeps the whole run near three minutes; any duration works by hand.
# Any crash, sanitizer report, timeout or out-of-memory fails the run and
# names the saved input: copy it into tests/fuzz/regressions/<target>/, where
# the ordinary test suite replays it (ctest -L fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-40}"
shift || true

# Target, and the longest input worth trying for its parser.
declare -A max_len=(
  [store_frames]=4096          # a few frames: 5-byte header, payload, 32-byte MAC
  [negotiation_messages]=8192  # a few cycles of 1-4 ranks' messages
  [tcp_frames]=4096            # 24-byte headers and payloads of up to 4 KiB
  [shm_slots]=1024             # rounds of up to eight 8-byte slot headers
  [tcp_handshake]=256          # one 112-byte handshake frame and two bytes of set-up
)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(store_frames negotiation_messages tcp_frames shm_slots tcp_handshake)
fi

# libFuzzer's runtime comes with clang's compiler-rt; Debian ships it apart.
need=()
command -v clang++-14 >/dev/null || need+=(clang-14)
dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed" ||
  need+=(libclang-rt-14-dev)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
./tools/install-deps.sh

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
mkdir -p build-fuzz
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}" \
  -DRINGLET_BUILD_FUZZERS=ON -DRINGLET_BUILD_TESTS=OFF -DRINGLET_BUILD_BENCH=OFF \
  -DRINGLET_WITH_CUDA=OFF -DRINGLET_WITH_NCCL=OFF -DRINGLET_WITH_UCX=OFF \
  -DRINGLET_WITH_MPI=OFF -DRINGLET_WITH_PYTHON=OFF >build-fuzz/configure.log 2>&1 ||
  { cat build-fuzz/configure.log; exit 1; }
cmake --build build-fuzz --parallel "$(nproc)" --target "${targets[@]/#/fuzz_}"

failed=()
for t in "${targets[@]}"; do
  [ -n "${max_len[$t]:-}" ] || { echo "fuzz: unknown target '$t'"; exit 2; }
  work="build-fuzz/corpus/$t"
  crashes="build-fuzz/crashes/$t"
  mkdir -p "$work" "$crashes"
  log="build-fuzz/$t.log"
  echo "fuzz: $t for ${seconds}s (max_len ${max_len[$t]})"
  seeds=()
  [ -d "tests/fuzz/corpus/$t" ] && seeds=("tests/fuzz/corpus/$t")
  status=0
  "build-fuzz/bin/fuzz_$t" "$work" "${seeds[@]}" \
    -max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log"
    saved=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    echo "fuzz: $t FAILED (exit $status); input saved as ${saved:-? (see $log)}"
    echo "fuzz: reproduce with build-fuzz/bin/fuzz_$t ${saved:-<input>}"
    failed+=("$t")
  else
    echo "fuzz: $t ok: ${runs:-?} runs, ${rate:-?} exec/s, ${cov:-cov: ?}"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${seconds}s each without a finding"
