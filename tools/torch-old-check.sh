#!/usr/bin/env bash
# ringlet.torch on the oldest PyTorch PyPI serves for this Python (1.13.0 for
# CPython 3.11), beside the newest that tools/python-requirements.txt pins:
# test_torch_collectives.py, test_torch_autograd.py, test_torch_errors.py,
# test_torch_training.py, test_error_classes.py and test_interrupts.py at two
# and three ranks, and the MNIST example, run by the python of a virtual
# environment (.venv-torch-old/, git-ignored) against the package
# tools/build.sh put into build/python. The extension module takes tensors
# through DLPack and never links torch, so one build serves both versions.
# test_torch_scaling.py is left out: it checks the core's arithmetic, which
# does not depend on the torch version, and takes minutes.
#
#   tools/torch-old-check.sh [build dir, default build]
#   RINGLET_OLD_TORCH=2.0.1 tools/torch-old-check.sh   (another version)
#
# It needs PyPI (pip, network access) the first time: PyPI's Linux wheels of
# 1.13 are CUDA builds, and torch's own dependencies bring the CUDA libraries
# they link (cuBLAS, cuDNN, NVRTC and the runtime, about 900 MB beside the
# 890 MB wheel, so about 1.8 GB on a fresh machine; CPU tensors never call
# them). After that pip's cache serves them, and the environment is reused
# while it holds the wanted version.
#
# Cost (2 cores): about 10 s to download, 40 s to install into a fresh
# environment (none when it is there) and 80 s of tests and the example.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
version=${RINGLET_OLD_TORCH:-1.13.0}
venv=.venv-torch-old
python=$venv/bin/python
# What the suites need beside torch (numpy 1: torch 1.13 was built against
# its ABI; cloudpickle, a dependency of the package).
deps=("numpy==1.26.4" "typing-extensions==4.16.0" "pytest==9.2.0" "cloudpickle==3.1.3")

if [ ! -x "$build/bin/ringletrun" ] || [ ! -d "$build/python/ringlet" ]; then
  echo "torch-old-check: $build has no ringletrun or python package; run tools/build.sh" >&2
  exit 2
fi

installed() {
  [ -x "$python" ] && [ "$("$python" -c \
    'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null)" = "$version" ]
}

if ! installed; then
  echo "torch-old-check: installing torch $version into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$python" -m pip install -q --disable-pip-version-check "torch==$version"
fi
"$python" -m pip install -q --disable-pip-version-check "${deps[@]}"

"$python" -c "import torch; print('torch-old-check: torch', torch.__version__)"

# The suites' environment, as tests/python/CMakeLists.txt sets it.
export PYTHONPATH="$PWD/$build/python:$PWD/tests/python"
export RINGLET_STALL_TIMEOUT_SECONDS=120 OMP_NUM_THREADS=1
run=("$build/bin/ringletrun")
failed=()
# suite -> the modules it needs (the interrupt suite's torch tests need torch).
suites=("test_torch_collectives torch" "test_torch_autograd torch" "test_torch_errors torch"
        "test_torch_training torch" "test_error_classes numpy" "test_interrupts numpy,torch")
for np in 2 3; do
  for entry in "${suites[@]}"; do
    read -r suite needs <<< "$entry"
    log="$build/torch-old-$suite-np$np.log"
    echo "torch-old-check: $suite.py at np=$np"
    if ! timeout 300 "${run[@]}" -np "$np" "$python" tests/python/run_if_installed.py "$needs" \
        "tests/python/$suite.py" > "$log" 2>&1; then
      failed+=("$suite.py np=$np")
      tail -40 "$log"
    fi
    grep -E '^\[0\]<stdout>:[0-9]+ (passed|failed)' "$log" || true
  done
done
echo "torch-old-check: pytorch_mnist.py at np=2"
if ! timeout 300 "${run[@]}" -np 2 "$python" examples/pytorch_mnist.py --epochs 1 --max-steps 30 \
    --check > "$build/torch-old-mnist.log" 2>&1; then
  failed+=("pytorch_mnist.py")
  tail -40 "$build/torch-old-mnist.log"
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "torch-old-check: torch $version failed: ${failed[*]}" >&2
  exit 1
fi
echo "torch-old-check: torch $version passed the suites and the MNIST example"
