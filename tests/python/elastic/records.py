"""What the elastic training scripts (train_torch.py, train_keras.py) leave
for the tests and the benchmark to read: one file per worker and kind
("<host>_<slot>.<kind>", a JSON value a line), and a wait for one to show."""

import json
import os
import time


def records(out, worker, name):
    """The values worker `worker` recorded under `name` in `out`, in order."""
    path = os.path.join(out, f"{worker}.{name}")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def wait_for(what, check, timeout=90):
    """check()'s first true value, polled; AssertionError naming `what` at the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")
