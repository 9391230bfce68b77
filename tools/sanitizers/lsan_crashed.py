#!/usr/bin/env python3
"""Whether a ctest run failed only because LeakSanitizer itself crashed.

    tools/sanitizers/lsan_crashed.py build-asan/Testing/Temporary/LastTest.log

At a process's exit LeakSanitizer stops every thread with a tracer (ptrace)
before it scans memory. Under load, with threads still starting or ending
(UCX's progress thread, for one), that tracer can itself crash: "Tracer caught
signal 11 ... LeakSanitizer has encountered a fatal error". That is
LeakSanitizer failing to look, not a report of ours. Exit status 0, naming
them, when at least one test failed and every failed test's output holds
that fatal error (tools/asan.sh then runs them once more); 1 otherwise (a
real failure among them, or none failed).
"""

import re
import sys

LSAN_CRASHED = "LeakSanitizer has encountered a fatal error"
TESTING = re.compile(r"^\d+/\d+ Testing: (.+)$")


def failed_tests(log_text):
    """{test name: its output} of every test the log says failed."""
    failed = {}
    name, lines = None, []
    for line in log_text.splitlines():
        started = TESTING.match(line)
        if started:
            name, lines = started.group(1), []
            continue
        if name is None:
            continue
        if line.startswith("Test Failed") or line.startswith("Test Passed") or \
                line.startswith("Test Not Run"):
            if not line.startswith("Test Passed"):
                failed[name] = "\n".join(lines)
            name = None
            continue
        lines.append(line)
    return failed


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(argv[1], errors="replace") as f:
        failed = failed_tests(f.read())
    if not failed or not all(LSAN_CRASHED in out for out in failed.values()):
        return 1
    for name in failed:
        print(f"lsan_crashed: {name}: LeakSanitizer's tracer crashed; running it once more")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
