"""How long an elastic job takes to re-form after a worker dies: from the
SIGKILL of one worker to the first training step of the smaller job on a
survivor, at 2, 3 and 4 workers (one slot each on pretend hosts, so that
Horovod's rule, a failed host leaves the job, applies).

    PYTHONPATH=build/python python3 bench/python/elastic_reform.py [--runs 3] [--sizes 2,3,4]
        [--horovodrun PATH --horovod-python PATH]

Each run trains tests/python/elastic/train_torch.py under
ringletrun --min-np 1 --host-discovery-script; with --horovodrun, the same
script (on horovod.torch) under Horovod's elastic driver too, its pretend
hosts reached through bench/python/pretend_hosts/ssh. The table gives p50,
min and max over the runs, in seconds."""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "tests", "python", "elastic", "train_torch.py")
RSH = os.path.join(ROOT, "tests", "python", "elastic", "local_rsh.sh")
PRETEND_SSH = os.path.join(ROOT, "bench", "python", "pretend_hosts")
sys.path.insert(0, os.path.dirname(TRAIN))
from records import records, wait_for  # noqa: E402


def one_run(launch, size):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        discover = os.path.join(tmp, "discover.sh")
        with open(discover, "w") as f:
            f.write("#!/bin/sh\n" + "".join(f"echo h{i}:1\n" for i in range(size)))
        os.chmod(discover, 0o755)
        with open(os.path.join(tmp, "log"), "w") as log:
            argv, env = launch(size, discover, out)
            job = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
            try:
                victim, survivor = f"h{size - 1}_0", "h0_0"
                wait_for("training at full size", lambda: any(
                    p[2] == size and p[1] >= 4 for p in records(out, victim, "progress")), 120)
                os.kill(records(out, victim, "pid")[0], signal.SIGKILL)
                killed = time.monotonic()
                resumed = wait_for("the smaller job's first step", lambda: any(
                    p[2] == size - 1 for p in records(out, survivor, "progress"))
                    and time.monotonic(), 120)
                return resumed - killed
            finally:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sizes", default="2,3,4")
    p.add_argument("--ringletrun", default=os.path.join(ROOT, "build", "bin", "ringletrun"))
    p.add_argument("--horovodrun", help="Horovod's horovodrun, to measure it beside")
    p.add_argument("--horovod-python", default=sys.executable,
                   help="the Python with horovod.torch installed")
    args = p.parse_args()

    def ringlet(size, discover, out):
        return ([args.ringletrun, "-np", str(size), "--min-np", "1", "--max-np", str(size),
                 "--host-discovery-script", discover, "--rsh", RSH, sys.executable, TRAIN, out],
                dict(os.environ))

    def horovod(size, discover, out):
        env = dict(os.environ, ELASTIC_TRAIN_MODULE="horovod.torch",
                   PATH=f"{PRETEND_SSH}:{os.path.dirname(args.horovod_python)}:"
                        f"{os.environ['PATH']}")
        return ([args.horovodrun, "-np", str(size), "--min-np", "1", "--max-np", str(size),
                 "--host-discovery-script", discover, args.horovod_python, TRAIN, out], env)

    launchers = [("Ringlet", ringlet)] + ([("Horovod 0.28.1", horovod)] if args.horovodrun
                                          else [])
    print("| launcher | workers | re-formed after (p50) | min | max |")
    print("| --- | --- | --- | --- | --- |")
    for size in map(int, args.sizes.split(",")):
        for name, launch in launchers:
            times = [one_run(launch, size) for _ in range(args.runs)]
            print(f"| {name} | {size} → {size - 1} | {statistics.median(times):.2f} s | "
                  f"{min(times):.2f} s | {max(times):.2f} s |", flush=True)


if __name__ == "__main__":
    main()
