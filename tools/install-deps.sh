#!/usr/bin/env bash
# Installs every system dependency Ringlet builds against, from Debian's
# packages. Idempotent: packages already present are left alone, and apt is
# not even consulted when nothing is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libhwloc-dev hwloc
  libucx-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  libcli11-dev
  nlohmann-json3-dev
  libdlpack-dev
  libhighwayhash-dev libfarmhash-dev
  libssl-dev
  iproute2 util-linux
  slurmd slurmctld slurm-client munge
  default-jre-headless
  python3 python3-dev python3-venv python3-pip
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # The daemons among them (munge, Slurm's) are started by the tests that
  # need them, with configurations of their own, never by their packages:
  # where no policy says so already, one does for the install.
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" > /dev/null
    $sudo chmod 755 "$policy"
    made_policy=1
  fi
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  if [ "$made_policy" = 1 ]; then $sudo rm -f "$policy"; fi
fi

# Python: what builds the bindings (nanobind; scikit-build-core for
# `pip install .`), runs their tests (pytest) and the training examples (the
# frameworks, from PyPI). Pinned in tools/python-requirements.txt; pip's own
# cache keeps a second install from downloading again.
python_requirements="$(dirname "$0")/python-requirements.txt"
if ! python3 "$(dirname "$0")/python_requirements_met.py" "$python_requirements"; then
  echo "install-deps: installing Python packages from $python_requirements"
  # A Debian python3 marks its packages as the system's own (PEP 668): there,
  # these go beside them, as the machine's tools would.
  pip_flags=(--quiet --disable-pip-version-check)
  if python3 -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
    pip_flags+=(--break-system-packages)
  fi
  python3 -m pip install "${pip_flags[@]}" -r "$python_requirements"
fi
