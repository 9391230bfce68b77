"""PyTorch's own backend suite (torch.testing._internal.distributed.
distributed_test, the _DistTestBase that PyTorch's test_distributed_spawn.py
runs for Gloo, NCCL and UCC) run for the ringlet backend on the CPU.

    torch_distributed_suite.py [--world-size N] [--summary FILE] [-k PATTERN ...]

The suite's gates name the backends they allow ("gloo", "nccl", "ucc",
"mpi"), so Ringlet would be skipped wherever they are consulted. This runner
runs the suite as Gloo's run: BACKEND is "ringlet", a string that the
suite's gates take for "gloo" (it compares equal to "gloo" and hashes as
"gloo", so `BACKEND != "gloo"`, `BACKEND in {"gloo"}` and the feature sets of
DistTestCases that hold "gloo" let it through), while torch.distributed
itself is given the plain name "ringlet". The process groups that a test
makes with backend="gloo" by name stay Gloo's.

Each test forks WORLD_SIZE fresh processes (PyTorch's MultiProcessTestCase),
which start Ringlet through init_process_group's file:// store.

The outcome of every test is compared with torch_distributed_suite_failures.txt,
the tests known to fail and why. Exit 0 when every other test passed or was
skipped; 1 when one of them failed (a test listed there that now passes is
reported, not failed: the list is then out of date). With -k, only the
tests whose names contain one of the patterns run.
"""

import argparse
import os
import sys
import tempfile
import time
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
_FAILURES = os.path.join(_HERE, "torch_distributed_suite_failures.txt")

# Read when the suite's modules are imported, in the parent and in each rank.
os.environ.setdefault("WORLD_SIZE", "2")
os.environ["BACKEND"] = "ringlet"
os.environ.setdefault("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120")
os.environ.setdefault("TEMP_DIR", tempfile.gettempdir())
# A rank whose peer failed a test waits in its collective no longer than this.
os.environ.setdefault("RINGLET_STALL_TIMEOUT_SECONDS", "60")

import torch  # noqa: E402

import ringlet.torch  # noqa: E402,F401  registers the backend "ringlet"


class _TakenForGloo(str):
    """ "ringlet", which the suite's backend gates take for "gloo"."""

    def __eq__(self, other):
        return str.__eq__(self, other) is True or other == "gloo"

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash("gloo")


def _import_suite():
    """distributed_test, whose BACKEND (read from os.environ at import, where
    the decorators that gate each test are evaluated) is _TakenForGloo."""
    from torch.testing._internal import common_distributed
    cases = common_distributed.DistTestCases
    # require_backend_is_available() asks "is it available?" of dist.Backend's
    # plain "ringlet": a plugin is.
    cases.backend_feature["plugin"].add("ringlet")
    environ = os.environ

    class _Environ(type(environ)):
        def __getitem__(self, key):
            value = super().__getitem__(key)
            return _TakenForGloo(value) if key == "BACKEND" else value

    # The same variables (one dict, one putenv), only BACKEND read otherwise.
    os.environ = _Environ(environ._data, environ.encodekey, environ.decodekey,
                          environ.encodevalue, environ.decodevalue)
    try:
        from torch.testing._internal.distributed import distributed_test
    finally:
        os.environ = environ
    # Lists consulted while the tests run (profiling of collectives).
    for allowed in (distributed_test.PROFILING_SUPPORTED_BACKENDS,
                    distributed_test.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):
        allowed.append("ringlet")
    return distributed_test


_suite = _import_suite()


class TestDistBackendWithForkRINGLET(_suite.TestDistBackend,
                                      _suite.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # Forked, not spawned as PyTorch's runner does: a spawned rank imports
        # torch and the suite anew, seconds per rank and test. This process
        # has imported them but started nothing (no Ringlet runtime, no
        # thread of its own), so each rank starts from a clean state.
        self._start_processes(torch.multiprocessing.get_context("fork").Process)


def _known_failures():
    """{test name: (class, reason)} from torch_distributed_suite_failures.txt."""
    known = {}
    with open(_FAILURES) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, kind, reason = (part.strip() for part in line.split("|", 2))
            known[name] = (kind, reason)
    return known


class _Outcomes(unittest.TextTestResult):
    """Each test's outcome and, for a failure, the last line of its error."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}  # name -> (outcome, detail, seconds)
        self._started = {}

    @staticmethod
    def _name(test):
        return test.id().rsplit(".", 1)[-1]

    def startTest(self, test):
        self._started[self._name(test)] = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        name = self._name(test)
        seconds = time.monotonic() - self._started.get(name, time.monotonic())
        self.outcomes[name] = (outcome, detail, seconds)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason.splitlines()[0] if reason else "")

    @staticmethod
    def _cause(err):
        text = str(err[1])
        # A rank's failure comes back as the rank's traceback in text: its
        # last exception line says why.
        lines = [l.strip() for l in text.splitlines() if l.strip()]
        causes = [l for l in lines if "Error:" in l or "Exception:" in l]
        return (causes[-1] if causes else (lines[-1] if lines else type(err[1]).__name__))[:300]

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._cause(err))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self._cause(err))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=int(os.environ["WORLD_SIZE"]))
    parser.add_argument("--summary", help="write each test's outcome to this file")
    parser.add_argument("-k", action="append", default=[], help="run the tests whose names hold it")
    args = parser.parse_args()
    if args.world_size != int(os.environ["WORLD_SIZE"]):
        # Read at import (here and in the ranks): start again with it set.
        os.environ["WORLD_SIZE"] = str(args.world_size)
        os.execv(sys.executable, [sys.executable] + sys.argv)

    loader = unittest.TestLoader()
    names = loader.getTestCaseNames(TestDistBackendWithForkRINGLET)
    if args.k:
        names = [n for n in names if any(k in n for k in args.k)]
    suite = unittest.TestSuite(TestDistBackendWithForkRINGLET(n) for n in names)
    runner = unittest.TextTestRunner(resultclass=_Outcomes, verbosity=2, stream=sys.stdout)
    started = time.monotonic()
    result = runner.run(suite)
    elapsed = time.monotonic() - started

    known = _known_failures()
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    unexpected, fixed, lines = [], [], []
    for name in sorted(result.outcomes):
        outcome, detail, seconds = result.outcomes[name]
        counts[outcome] += 1
        lines.append(f"{name} | {outcome} | {seconds:.1f} s | {detail}")
        if outcome == "failed" and name not in known:
            unexpected.append(f"{name}: {detail}")
        elif outcome == "passed" and name in known:
            fixed.append(f"{name} (listed as {known[name][0]})")
    if args.summary:
        with open(args.summary, "w") as f:
            f.write("\n".join(lines) + "\n")

    print(f"\nPyTorch's distributed_test for ringlet at world size {args.world_size}: "
          f"{len(result.outcomes)} tests in {elapsed:.0f} s")
    for name in fixed:
        print(f"  now passes, listed as failing in {os.path.basename(_FAILURES)}: {name}")
    for line in unexpected:
        print(f"  FAILED, not listed in {os.path.basename(_FAILURES)}: {line}")
    print(f"outcomes: passed {counts['passed']}, failed {counts['failed']} "
          f"({counts['failed'] - len(unexpected)} of them listed with their reasons in "
          f"{os.path.basename(_FAILURES)}), skipped {counts['skipped']}")
    sys.exit(1 if unexpected else 0)


if __name__ == "__main__":
    main()
