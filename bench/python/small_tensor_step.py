"""The many-small-tensors step as DistributedOptimizer takes it: one
asynchronous in-place allreduce (Sum, float32) per tensor, then a
synchronize of each, timed per step at the slowest rank (p50, p99, mean in
microseconds).

    ringletrun -np 2 python bench/python/small_tensor_step.py [100x64K 1000x4K resnet50]
    horovodrun -np 2 python bench/python/small_tensor_step.py --api horovod ...

`NxSIZE` is N tensors of SIZE bytes; `resnet50` is torchvision's ResNet-50's
161 gradients (25.6 M floats). The C++ API's same step, for the first two:

    ringletrun -np 2 build/bin/ringlet-bench allreduce -b 64K -e 64K --tensors 100
"""

import argparse
import statistics
import time

import torch

UNITS = {"K": 1 << 10, "M": 1 << 20}


def tensors_of(scenario):
    if scenario == "resnet50":
        import torchvision
        return [torch.zeros_like(p) for p in torchvision.models.resnet50().parameters()]
    count, size = scenario.split("x")
    nbytes = int(size[:-1]) * UNITS[size[-1]] if size[-1] in UNITS else int(size)
    return [torch.zeros(nbytes // 4) for _ in range(int(count))]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--api", choices=["ringlet", "horovod"], default="ringlet")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("scenarios", nargs="*", default=["100x64K", "1000x4K", "resnet50"])
    args = p.parse_args()
    if args.api == "horovod":
        import horovod.torch as hvd
    else:
        import ringlet.torch as hvd
    hvd.init()
    torch.set_num_threads(1)
    if hvd.rank() == 0:
        print(f"# {args.api}.torch, np={hvd.size()}: allreduce_async_ of every tensor, then "
              "synchronize; us per step at the slowest rank")
        print(f"{'step':>10} {'tensors':>8} {'MiB':>8} {'p50':>10} {'p99':>10} {'mean':>10}")
    for scenario in args.scenarios:
        tensors = tensors_of(scenario)
        names = [f"{scenario}.{i}" for i in range(len(tensors))]
        times = []
        for step in range(args.steps + 5):
            start = time.perf_counter()
            handles = [hvd.allreduce_async_(t, name=n, op=hvd.Sum) for t, n in zip(tensors, names)]
            for h in handles:
                hvd.synchronize(h)
            if step >= 5:
                times.append(time.perf_counter() - start)
        slowest = hvd.allreduce(torch.tensor(times, dtype=torch.float64), op=hvd.Max,
                                name=f"{scenario}.times")
        us = sorted((slowest * 1e6).tolist())
        if hvd.rank() == 0:
            mib = sum(t.numel() * 4 for t in tensors) / (1 << 20)
            print(f"{scenario:>10} {len(tensors):>8} {mib:>8.2f} {statistics.median(us):>10.0f} "
                  f"{us[min(len(us) - 1, int(len(us) * 0.99))]:>10.0f} "
                  f"{statistics.fmean(us):>10.0f}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
