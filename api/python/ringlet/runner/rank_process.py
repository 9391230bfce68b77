"""Runs a function as one rank of a job in a process of its own (a Spark
task's rank), so that the engine's worker, which it may reuse for other
work, never holds a Ringlet runtime, a framework's threads or the job's
environment afterwards.

The function, its arguments and the result travel pickled (cloudpickle)
through files in a private directory (mode 0700); the rank's environment,
the job's secret among it, goes through the process's environment and never
its command line. The process dies with its parent (PR_SET_PDEATHSIG), so an
engine that kills the task leaves nothing running."""

import os
import signal
import subprocess
import sys
import tempfile
import threading

import cloudpickle

from ringlet.runner.failures import RankFailure


class RankResult:
    """What a rank's process left: its return value or its failure, and its
    output where it was captured."""

    def __init__(self, rank, value=None, failure=None, stdout="", stderr=""):
        self.rank = rank
        self.value = value
        self.failure = failure
        self.stdout = stdout
        self.stderr = stderr


def run_rank(rank, fn, args, kwargs, env, capture_output=False, executable=None,
             on_start=None, on_line=None):
    """Runs ``fn(*args, **kwargs)`` in a new Python process with environment
    ``env``; returns its RankResult once the process ends. ``capture_output``
    collects its stdout and stderr instead of letting them through, and
    ``on_line(kind, line)`` ("stdout" or "stderr") receives each of their
    lines as it comes, where given; ``on_start`` receives the process (a
    subprocess.Popen) once it runs, so that the caller may end it."""
    with tempfile.TemporaryDirectory(prefix="ringlet-rank-") as work:
        call_path = os.path.join(work, "call.pkl")
        result_path = os.path.join(work, "result.pkl")
        with open(os.open(call_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            cloudpickle.dump((fn, tuple(args), dict(kwargs)), f)
        env = dict(env, RINGLET_RANK_CALL=call_path, RINGLET_RANK_RESULT=result_path,
                   RINGLET_RANK_PARENT=str(os.getpid()))
        pipe = subprocess.PIPE if capture_output else None
        with subprocess.Popen([executable or sys.executable, "-m", "ringlet.runner.rank_main"],
                              env=env, stdout=pipe, stderr=pipe, stdin=subprocess.DEVNULL,
                              text=True, errors="replace") as done:
            if on_start is not None:
                on_start(done)
            if capture_output and on_line is not None:
                out, err = _pump_lines(done, on_line)
            else:
                out, err = done.communicate()
        out, err = (out or "", err or "")
        if os.path.exists(result_path):
            with open(result_path, "rb") as f:
                ok, payload, second_hand = cloudpickle.load(f)
            if ok:
                return RankResult(rank, value=payload, stdout=out, stderr=err)
            return RankResult(rank, failure=RankFailure(rank, payload, second_hand), stdout=out,
                              stderr=err)
        return RankResult(rank, failure=RankFailure(rank, _how_it_ended(done.returncode)),
                          stdout=out, stderr=err)


def _pump_lines(process, on_line):
    """Hands each line of the process's stdout and stderr to ``on_line`` as
    it comes (a thread per stream); returns both, whole, once it ended."""
    seen = {"stdout": [], "stderr": []}

    def pump(stream, kind):
        for line in stream:
            seen[kind].append(line)
            on_line(kind, line.rstrip("\n"))

    threads = [threading.Thread(target=pump, args=(process.stdout, "stdout"), daemon=True),
               threading.Thread(target=pump, args=(process.stderr, "stderr"), daemon=True)]
    for t in threads:
        t.start()
    process.wait()
    for t in threads:
        t.join()
    return "".join(seen["stdout"]), "".join(seen["stderr"])


def _how_it_ended(returncode):
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return f"its process was killed by {name} before it returned"
    return f"its process exited with status {returncode} before it returned"
