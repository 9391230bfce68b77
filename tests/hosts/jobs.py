"""ringletrun jobs across namespaced hosts, run from a test: the paths of the
build's programs, and a job whose output is read while it runs.

The build's programs come from the environment that ctest sets
(tests/hosts/CMakeLists.txt), or else from `build/` beside the sources.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from netns import RSH

SOURCE_DIR = Path(__file__).resolve().parents[2]
_BUILD_BIN = SOURCE_DIR / "build" / "bin"


def program(variable: str, name: str) -> str:
    """The path ctest gave in `variable`, else build/bin/<name>."""
    return os.environ.get(variable) or str(_BUILD_BIN / name)


RINGLETRUN = program("RINGLET_TEST_RINGLETRUN", "ringletrun")
COLLECTIVES_TEST = program("RINGLET_TEST_COLLECTIVES", "collectives_test")
RUNTIME_TEST = program("RINGLET_TEST_RUNTIME", "runtime_test")
HOSTS_RANK = program("RINGLET_TEST_HOSTS_RANK", "hosts_rank")

# What every job of these tests runs under: short deadlines, so that a fault
# ends a job in seconds, and nothing read from the caller's tuning.
BASE_ENV = {
    "RINGLET_TIMEOUT_SECONDS": "20",
    "RINGLET_START_TIMEOUT_SECONDS": "20",
    "RINGLET_ABORT_GRACE_SECONDS": "5",
}

_PREFIX = re.compile(r"^\[(\d+)\]<(stdout|stderr)>:(.*)$")


def rank_lines(output: str, stream: str = "stdout") -> dict[int, list[str]]:
    """Each rank's lines of one stream, without the `[R]<stream>:` prefix."""
    lines: dict[int, list[str]] = {}
    for line in output.splitlines():
        m = _PREFIX.match(line)
        if m and m.group(2) == stream:
            lines.setdefault(int(m.group(1)), []).append(m.group(3))
    return lines


def ringletrun_argv(host_args: list[str], np: int, command: list[str],
                    rsh: bool = True) -> list[str]:
    return [RINGLETRUN, *(["--rsh", RSH] if rsh else []), *host_args, "-np", str(np), *command]


def job_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(BASE_ENV)
    env.update(extra)
    return env


class Job:
    """A ringletrun job started in a session of its own; its output lines are
    collected as they come, so a test can wait for some while it runs."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None):
        self.argv = argv
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            argv, env=env if env is not None else job_env(), cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
            start_new_session=True)
        self.lines: list[str] = []
        self._fresh: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            self._fresh.put(line)
        self._fresh.put(None)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, count: int, timeout: float) -> list[re.Match]:
        """Waits until `count` lines match `pattern` (re.search); fails the
        test (AssertionError with the output so far) if the job ends first or
        the time runs out."""
        wanted = re.compile(pattern)
        found = [m for m in map(wanted.search, self.lines) if m]
        deadline = time.monotonic() + timeout
        while len(found) < count:
            left = deadline - time.monotonic()
            try:
                line = self._fresh.get(timeout=max(left, 0.01))
            except queue.Empty:
                line = ""
            if line is None:
                raise AssertionError(f"the job ended ({self.process.wait()}) with {len(found)} of "
                                     f"{count} lines matching {pattern!r}:\n{self.output}")
            if line and (m := wanted.search(line)):
                found.append(m)
            if left <= 0 and len(found) < count:
                raise AssertionError(f"{len(found)} of {count} lines matching {pattern!r} after "
                                     f"{timeout} s:\n{self.output}")
        return found

    def wait(self, timeout: float) -> int:
        """The job's exit status (negative: the signal that ended it). On
        timeout the whole session is killed and the test fails."""
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"ringletrun still running after {timeout} s; killed:\n{self.output}")
        self._reader.join(timeout=10)
        return status

    def seconds(self) -> float:
        return time.monotonic() - self.started

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        self._reader.join(timeout=10)


def run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 60,
        cwd: str | None = None) -> tuple[int, str]:
    """Runs a job to its end: (exit status, output)."""
    job = Job(argv, env, cwd)
    status = job.wait(timeout)
    return status, job.output
