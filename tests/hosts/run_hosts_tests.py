"""Runs pytest files of the namespaced-hosts tests for ctest, or reports
them SKIPPED (exit 77) with the reason: namespaced hosts cannot be made here
(netns.why_unavailable()), or a module they need is not installed. A run
that passes with some tests skipped is reported SKIPPED too, naming them,
never as a pass.

    run_hosts_tests.py [--needs numpy,...] test_file.py [pytest arguments]

SIGTERM (a test runner giving up) ends the run as Ctrl-C does, so that the
hosts are torn down; hosts left by a run killed outright are removed by the
next one (netns.py).
"""

import importlib
import signal
import sys

import netns


class SkipCounter:
    def __init__(self):
        self.skipped = []

    def pytest_runtest_logreport(self, report):
        if report.skipped:
            self.skipped.append(report.nodeid)


def main():
    args = sys.argv[1:]
    needs = []
    if args[:1] == ["--needs"]:
        needs, args = args[1].split(","), args[2:]
    missing = []
    for module in needs:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        print(f"SKIPPED: {', '.join(missing)} not installed (pip install {' '.join(missing)})")
        sys.exit(77)
    why = netns.why_unavailable()
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
