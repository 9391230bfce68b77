"""Exits 0 when every pinned requirement of the file given is installed at
its version, so that install-deps.sh runs pip only when something is missing."""

import sys
from importlib import metadata


def main(path):
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, version = line.partition("==")
        name = name.split("[", 1)[0]  # jax[cpu]: the extras are not part of the name
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            return 1
        if version and installed.split("+")[0] != version:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
