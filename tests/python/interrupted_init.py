"""An init() interrupted after its rank joined the rendezvous (run by
ringletrun with 3 ranks): rank 2 comes late, so ranks 0 and 1 wait for it
in init(), and Ctrl-C reaches rank 1 while it waits, after rank 0's store
counted it in. Rank 1's KeyboardInterrupt must carry, as its cause, an
InitError (code 8, aborted) saying the job must be started again, and
init() again must fail at once with that InitError instead of waiting for
the start timeout. Ranks 0 and 2 fail their init() (a timeout or the lost
store), never hang. Exits 0 when all of that held."""

import os
import signal
import socket
import threading
import time

import ringlet.numpy as hvd
from ringlet.common import exceptions

# The ranks that stay give up this long after they started.
START_TIMEOUT = 6
# Rank 2 comes this late, well after rank 1 was interrupted.
LATE = 4.0


def wait_for_the_store():
    """Returns once rank 0's store accepts connections, so that rank 1's
    init() joins at once and is interrupted after it joined."""
    host, port = os.environ["RINGLET_RENDEZVOUS"].rsplit(":", 1)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def interrupted_rank():
    wait_for_the_store()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        hvd.init()
        raise AssertionError("init() returned although rank 2 had not come")
    except KeyboardInterrupt as e:
        cause = e.__cause__
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert isinstance(cause, exceptions.InitError), repr(cause)
    assert cause.code == 8, cause
    message = str(cause)
    for expected in ("ringlet: init on rank 1: interrupted while waiting for",
                     "after this rank had joined the rendezvous",
                     "the job must be started again"):
        assert expected in message, f"{expected!r} missing from: {message}"
    assert not hvd.is_initialized()

    started = time.monotonic()
    try:
        hvd.init()
        raise AssertionError("init() joined a rendezvous that counted this rank already")
    except exceptions.InitError as e:
        again = e
    took = time.monotonic() - started
    assert took < 1.0, f"init() again took {took:.1f} s to fail"
    assert again.code == 8, again
    for expected in ("an earlier init of this process was interrupted after this rank had "
                     "joined the rendezvous", "the job must be started again"):
        assert expected in str(again), f"{expected!r} missing from: {again}"
    assert not hvd.is_initialized()


def staying_rank(rank):
    if rank == 2:
        time.sleep(LATE)
    started = time.monotonic()
    try:
        hvd.init()
        raise AssertionError("init() succeeded without rank 1")
    except exceptions.InitError as e:
        assert e.code in (4, 5), e  # the lost store, or a timeout
        if rank == 0:
            assert "rank 1" in str(e), e
    took = time.monotonic() - started
    assert took < START_TIMEOUT + 10, f"init() took {took:.1f} s to fail"
    assert not hvd.is_initialized()


def main():
    os.environ["RINGLET_START_TIMEOUT_SECONDS"] = str(START_TIMEOUT)
    rank = int(os.environ["RINGLET_RANK"])
    if rank == 1:
        interrupted_rank()
    else:
        staying_rank(rank)
    print(f"rank {rank}: the interrupted init ended the job's rendezvous", flush=True)


if __name__ == "__main__":
    main()
