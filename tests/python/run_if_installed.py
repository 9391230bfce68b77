"""Runs a pytest file or an example script on this rank, or reports it
skipped (exit 77) with the reason when a module it needs is not installed.

    run_if_installed.py torch[,numpy...] test_file.py [pytest arguments]
    run_if_installed.py torch --script example.py [its arguments]
"""

import importlib
import runpy
import sys


def main():
    needs, args = sys.argv[1].split(","), sys.argv[2:]
    missing = []
    for module in needs:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        print(f"SKIPPED: {', '.join(missing)} not installed (pip install {' '.join(missing)})")
        sys.exit(77)
    if args and args[0] == "--script":
        sys.argv = args[1:]
        runpy.run_path(args[1], run_name="__main__")
        return
    import pytest
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-x"] + args))


if __name__ == "__main__":
    main()
