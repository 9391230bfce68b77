"""The process of one rank started by ringlet.runner.rank_process: calls the
pickled function and leaves ``(ok, value or traceback, second_hand)`` for
its parent. A function that left Ringlet running has it shut down at exit,
as any Ringlet process does."""

import ctypes
import os
import signal
import sys

import cloudpickle

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The parent may have gone before the call above took effect.
    if os.getppid() != parent:
        os._exit(1)


def _write_result(path, result):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        cloudpickle.dump(result, f)


def main():
    _die_with_parent(int(os.environ.pop("RINGLET_RANK_PARENT")))
    call_path = os.environ.pop("RINGLET_RANK_CALL")
    result_path = os.environ.pop("RINGLET_RANK_RESULT")
    with open(call_path, "rb") as f:
        fn, args, kwargs = cloudpickle.load(f)
    try:
        value = fn(*args, **kwargs)
        result = (True, value, False)
    except BaseException as e:  # the parent reports every way the function ended
        from ringlet.runner.failures import caused_by_another_rank, traceback_of
        result = (False, traceback_of(e), caused_by_another_rank(e))
    try:
        _write_result(result_path, result)
    except Exception as e:  # a return value that does not pickle is this rank's failure
        _write_result(result_path, (False, f"its return value could not be sent back: {e!r}",
                                    False))
    sys.stdout.flush()
    sys.stderr.flush()


if __name__ == "__main__":
    main()
