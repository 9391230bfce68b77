"""The console scripts of a pip install: each runs the command of the same
name that the wheel carries in ringlet/bin."""

import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _run(command):
    path = os.path.join(_BIN, command)
    if not os.path.exists(path):
        sys.exit(f"{command}: not found in {_BIN}; reinstall ringlet (pip install .)")
    os.execv(path, [command] + sys.argv[1:])


def ringletrun():
    # Elastic jobs run their driver (a Python module) with this Python.
    os.environ.setdefault("RINGLET_PYTHON", sys.executable)
    _run("ringletrun")


def ringlet_bench():
    _run("ringlet-bench")


def ringlet_topo():
    _run("ringlet-topo")
