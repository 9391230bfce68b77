#!/usr/bin/env bash
# The soak: four ranks run random collectives through the public API for
# [seconds] (default 120), every result checked against an independent
# reference; any wrong element, error or disagreement fails it. Builds what it
# needs in ./build (configured already, as for the tests). Extra arguments go
# to ringlet-soak, e.g. --seed N to replay a failed run's plan.
#   ./tools/soak.sh 120
#   ./tools/soak.sh 30 --seed 1234 --max-bytes 1M
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
[[ $# -gt 0 ]] && shift
if ! [[ $seconds =~ ^[0-9]+$ ]] || [[ $seconds -lt 1 ]]; then
  echo "usage: tools/soak.sh [seconds] [ringlet-soak arguments...]" >&2
  exit 2
fi
build=${RINGLET_BUILD_DIR:-build}
cmake --build "$build" --target ringletrun ringlet-soak
# Each wait on a peer may take long on a loaded machine; a hang still fails.
export RINGLET_TIMEOUT_SECONDS=${RINGLET_TIMEOUT_SECONDS:-120}
exec "$build/bin/ringletrun" -np 4 "$build/bin/ringlet-soak" --seconds "$seconds" "$@"
