#!/usr/bin/env bash
# Installs the system dependencies (once), configures and builds Ringlet into
# ./build. Extra arguments go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
cmake -S . -B build -G Ninja "$@"
cmake --build build --parallel "$(nproc)"
