#!/usr/bin/env bash
# `pip install .` as a user runs it, into a throwaway virtual environment
# (build-pip/venv, seeing the system's packages for torch and the build
# tools), then the installed package and commands run a two-rank job.
#
# The wheel is built cold in build-pip/ with CUDA off: the device code is
# compiled and linked by tools/build.sh already, and this check is about the
# package (the module, libringlet and the commands inside it, the console
# scripts, the extras). About 3 minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
venv="$(pwd)/build-pip/venv"
rm -rf "$venv"
mkdir -p build-pip
python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
  --no-deps -Ccmake.define.RINGLET_WITH_CUDA=OFF -Ccmake.define.RINGLET_WITH_NCCL=OFF .

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"  # away from the source tree, so that only the installed package imports
"$venv/bin/ringletrun" --check-build | grep -F "[X] PyTorch"
"$venv/bin/ringlet-bench" --help > /dev/null
"$venv/bin/ringletrun" -np 2 "$venv/bin/python" -c '
import ringlet, ringlet.torch as hvd, torch
assert "/build-pip/venv/" in ringlet.__file__, ringlet.__file__
hvd.init()
out = hvd.allreduce(torch.ones(4) * (hvd.rank() + 1), op=hvd.Sum)
assert out.tolist() == [3.0] * 4, out
print("rank", hvd.rank(), "of", hvd.size(), "ok:", ringlet.__file__)
hvd.shutdown()
'
"$venv/bin/ringletrun" -np 2 "$venv/bin/ringlet-bench" allreduce -b 4K -e 64K -f 4 | tail -3
echo "pip-check: the installed package works"
