#!/usr/bin/env bash
# Measures Ringlet's allreduce beside Open MPI's in the same processes: for
# each size the two alternate op by op under mpirun, and the tables report
# median per-op times (the only fair comparison on a noisy machine). Then the
# single-thread memcpy bandwidth at the same sizes, for scale.
#   tools/compare-mpi.sh [NP...]        default: 2 4
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
nps=("$@")
[ ${#nps[@]} -gt 0 ] || nps=(2 4)
for np in "${nps[@]}"; do
  echo "## allreduce, float32 sum, np=$np: Ringlet (ring) vs Open MPI, alternating"
  mpirun --allow-run-as-root --oversubscribe -np "$np" \
    "$bin/ringlet-bench" allreduce --backend ring,mpi -b 4K -e 256M -f 4 -n 20 -w 5 -c 1
done
echo "## single-thread memcpy, for scale"
"$bin/kernels_bench" --benchmark_filter='BM_Copy.*' --benchmark_min_time=0.2
