"""What the Python layer adds to an allreduce: hvd.allreduce (out of place)
and hvd.allreduce_ (in place), Sum, synchronous, timed per call from Python
at the sizes given, for comparison with ringlet-bench through the same
runtime path (--tensors 1: one named tensor per iteration) at the same sizes
and ranks in the same run:

    ringletrun -np 2 python bench/python/allreduce_overhead.py 4K 1M 64M
    ringletrun -np 2 build/bin/ringlet-bench allreduce -b 4K -e 64M -f 16 --tensors 1
"""

import sys
import time

import numpy as np
import torch

import ringlet.torch as hvd

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def per_call_times(nbytes, iterations, warmup, call):
    x = torch.ones(nbytes // 4, dtype=torch.float32)
    times = []
    for i in range(warmup + iterations):
        start = time.perf_counter()
        call(x, op=hvd.Sum, name="overhead")
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
        print(f"# hvd.allreduce (out of place) and hvd.allreduce_ (in place) from Python, "
              f"np={hvd.size()}, float32 sum; times in us, each call at its slowest rank")
        print(f"{'bytes':>12} {'iters':>6} {'oop_mean':>10} {'oop_p50':>10} {'oop_p99':>10} "
              f"{'ip_mean':>10} {'ip_p50':>10} {'ip_p99':>10}")
    for nbytes in sizes:
        iterations = max(10, min(1000, (1 << 30) // max(nbytes, 1) // 4))
        warmup = max(2, iterations // 10)
        oop = per_call_times(nbytes, iterations, warmup, hvd.allreduce)
        ip = per_call_times(nbytes, iterations, warmup, hvd.allreduce_)
        if hvd.rank() == 0:
            columns = [f"{f(t):>10.1f}" for t in (oop, ip)
                       for f in (np.mean, lambda a: np.percentile(a, 50),
                                 lambda a: np.percentile(a, 99))]
            print(f"{nbytes:>12} {iterations:>6} " + " ".join(columns), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
