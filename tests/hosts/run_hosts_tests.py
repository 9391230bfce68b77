"""Runs pytest files of the multi-host tests for ctest, or reports them
SKIPPED (exit 77) with the reason: their harness cannot run here (namespaced
hosts: netns.why_unavailable(); with --harness slurm, a one-node Slurm
cluster: slurm_cluster.why_unavailable()), or a module they need is not
installed. A run that passes with some tests skipped is reported SKIPPED
too, naming them, never as a pass.

    run_hosts_tests.py [--needs numpy,...] [--harness netns|slurm] test_file.py [pytest arguments]

SIGTERM (a test runner giving up) ends the run as Ctrl-C does, so that the
hosts are torn down; hosts left by a run killed outright are removed by the
next one (netns.py).
"""

import importlib
import signal
import sys

import netns
import slurm_cluster


class SkipCounter:
    def __init__(self):
        self.skipped = []

    def pytest_runtest_logreport(self, report):
        if report.skipped:
            self.skipped.append(report.nodeid)


def main():
    args = sys.argv[1:]
    needs = []
    harness = netns
    while args[:1] in (["--needs"], ["--harness"]):
        if args[0] == "--needs":
            needs = args[1].split(",")
        else:
            harness = {"netns": netns, "slurm": slurm_cluster}[args[1]]
        args = args[2:]
    missing = []
    for module in needs:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        print(f"SKIPPED: {', '.join(missing)} not installed (pip install {' '.join(missing)})")
        sys.exit(77)
    why = harness.why_unavailable()
    if why:
        print(f"SKIPPED: {why}")
        sys.exit(77)

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    import pytest
    counter = SkipCounter()
    status = pytest.main(["-q", "-p", "no:cacheprovider", "-rs"] + args, plugins=[counter])
    if status == 0 and counter.skipped:
        print(f"SKIPPED: {len(counter.skipped)} test(s) did not run: {', '.join(counter.skipped)}")
        sys.exit(77)
    sys.exit(status)


if __name__ == "__main__":
    main()
