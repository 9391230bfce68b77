"""What the Python layer adds to an allreduce: hvd.allreduce (out of place,
Sum, synchronous, as a training script calls it) timed per call from
Python, at the sizes given, for comparison with ringlet-bench's out-of-place
column at the same sizes and ranks in the same run:

    ringletrun -np 2 python bench/python/allreduce_overhead.py 4K 1M 64M
    ringletrun -np 2 build/bin/ringlet-bench allreduce -b 4K -e 64M -f 16
"""

import sys
import time

import numpy as np
import torch

import ringlet.torch as hvd

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def per_call_times(nbytes, iterations, warmup):
    x = torch.ones(nbytes // 4, dtype=torch.float32)
    times = []
    for i in range(warmup + iterations):
        start = time.perf_counter()
        hvd.allreduce(x, op=hvd.Sum, name="overhead")
        if i >= warmup:
            times.append(time.perf_counter() - start)
    # each call counted at its slowest rank, as ringlet-bench counts
    slowest = hvd.allreduce(torch.tensor(times, dtype=torch.float64), op=hvd.Max, name="times")
    return slowest.numpy() * 1e6


def main():
    sizes = [parse_size(s) for s in (sys.argv[1:] or ["4K", "1M", "64M"])]
    hvd.init()
    torch.set_num_threads(1)
    if hvd.rank() == 0:
        print(f"# hvd.allreduce from Python, np={hvd.size()}, float32 sum, out of place")
        print(f"{'bytes':>12} {'iters':>6} {'mean_us':>10} {'p50_us':>10} {'p99_us':>10}")
    for nbytes in sizes:
        iterations = max(5, min(1000, (256 << 20) // max(nbytes, 1) // 4))
        t = per_call_times(nbytes, iterations, warmup=max(2, iterations // 10))
        if hvd.rank() == 0:
            print(f"{nbytes:>12} {iterations:>6} {t.mean():>10.1f} {np.percentile(t, 50):>10.1f} "
                  f"{np.percentile(t, 99):>10.1f}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
