#!/usr/bin/env bash
# Installs the system dependencies (once), configures and builds Ringlet into
# ./build. Extra arguments go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
# ccache keys on paths relative to the source tree and leaves the build
# directory out, so that another tree of the same sources and flags (the
# wheel's, in tools/pip-check.sh) compiles from the cache.
export CCACHE_BASEDIR="$(pwd)" CCACHE_NOHASHDIR=1
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
            -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -G Ninja "${launcher[@]}" "$@"
cmake --build build --parallel "$(nproc)"
