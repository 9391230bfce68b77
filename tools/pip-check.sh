#!/usr/bin/env bash
# `pip install .` as a user runs it, into a throwaway virtual environment
# (build-pip/venv, seeing the system's packages for torch and the build
# tools), then the installed package and commands run a two-rank job.
#
# The wheel is built in build-wheel/ (beside build/, at the same depth) with
# the flags of tools/build.sh, so that ccache, where installed, hands it what
# that build compiled: this check is about the package (the module, the
# TensorFlow ops, libringlet and the commands inside it, the console scripts,
# the extras), and a cold build would take minutes more.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
venv="$(pwd)/build-pip/venv"
rm -rf "$venv"
mkdir -p build-pip
python3 -m venv --system-site-packages "$venv"
cache=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$(pwd)" CCACHE_NOHASHDIR=1
  cache=(-Ccmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache
         -Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
         -Ccmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  # The same compilers by the same names (pip's environment would pick g++
  # where CMake picked c++ for build/, and ccache tells them apart).
  for lang in C CXX; do
    compiler=$(sed -n "s/^CMAKE_${lang}_COMPILER:FILEPATH=//p" build/CMakeCache.txt 2>/dev/null)
    [ -n "$compiler" ] && cache+=("-Ccmake.define.CMAKE_${lang}_COMPILER=$compiler")
  done
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
  --no-deps -Cbuild-dir=build-wheel -Ccmake.build-type=RelWithDebInfo "${cache[@]}" .

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"  # away from the source tree, so that only the installed package imports
"$venv/bin/ringletrun" --check-build | grep -F "[X] PyTorch"
"$venv/bin/ringlet-bench" --help > /dev/null
if "$venv/bin/python" -c "import tensorflow" 2>/dev/null; then
  # Built against the TensorFlow of this machine: the op library must be in the package.
  "$venv/bin/python" -c "
from ringlet.tensorflow import ops
assert ops.library is not None, 'the TensorFlow op library is not in the installed package'
print('TensorFlow ops:', ops.__file__)" 2>&1 | grep -v "^WARNING\|^I0000\|oneDNN\|cpu_feature"
fi
"$venv/bin/ringletrun" -np 2 "$venv/bin/python" -c '
import ringlet, ringlet.torch as hvd, torch
assert "/build-pip/venv/" in ringlet.__file__, ringlet.__file__
hvd.init()
out = hvd.allreduce(torch.ones(4) * (hvd.rank() + 1), op=hvd.Sum)
assert out.tolist() == [3.0] * 4, out
print("rank", hvd.rank(), "of", hvd.size(), "ok:", ringlet.__file__)
hvd.shutdown()
'
if [ -f "$(dirname "$("$venv/bin/python" -c 'import ringlet; print(ringlet.__file__)')")/torch/_c10d_torch_version.txt" ]; then
  # Built against the torch of this machine: the torch.distributed backend,
  # found through the package's entry point (ringlet is not imported), over
  # env:// with ringletrun's ranks.
  port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$venv/bin/ringletrun" -np 2 "$venv/bin/python" -c '
import os
os.environ["RANK"], os.environ["WORLD_SIZE"] = os.environ["RINGLET_RANK"], os.environ["RINGLET_SIZE"]
import torch, torch.distributed as dist
dist.init_process_group("ringlet")
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert dist.get_backend() == "ringlet" and t.tolist() == [3.0] * 4, t
dist.destroy_process_group()
print("torch.distributed backend ringlet ok")
'
fi
"$venv/bin/ringletrun" -np 2 "$venv/bin/ringlet-bench" allreduce -b 4K -e 64K -f 4 | tail -3
echo "pip-check: the installed package works"
