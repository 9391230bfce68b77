#!/usr/bin/env bash
# Run here, where Debian's registry is reachable, before tests/gpu/device-check.sh
# goes to a GPU machine that reaches none: downloads the Debian packages that
# the build needs and that machine lacks into .gpu-deps/ (ignored by git), to
# travel with the working tree. device-check.sh unpacks them into a private
# prefix there with `dpkg -x`, never into /.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="$root/.gpu-deps"
packages=(
  libhwloc-dev libhwloc15
  libgtest-dev libgmock-dev
  libbenchmark-dev libbenchmark1debian
  libcli11-dev nlohmann-json3-dev libdlpack-dev
  libssl-dev libssl3
)
mkdir -p "$dest"
cd "$dest"
rm -f ./*.deb
# apt's sandbox user cannot write into a root-owned folder; the warning it
# prints about downloading unsandboxed is expected.
apt-get download "${packages[@]}" 2>&1 | grep -v "unsandboxed" || true
count=$(ls ./*.deb 2>/dev/null | wc -l)
if [ "$count" -ne "${#packages[@]}" ]; then
  echo "fetch-deps: expected ${#packages[@]} packages in $dest, found $count" >&2
  exit 1
fi
echo "fetch-deps: $count packages, $(du -sh . | cut -f1), in $dest"
