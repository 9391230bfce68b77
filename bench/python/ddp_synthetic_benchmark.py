"""The peer of examples/pytorch_synthetic_benchmark.py: the same model,
batch, data and timing loop under PyTorch's DistributedDataParallel (gloo on
the CPU), launched with torchrun:

    torchrun --nproc_per_node 2 bench/python/ddp_synthetic_benchmark.py --model resnet18 --batch-size 16
"""

import argparse
import os
import timeit

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models


def main():
    p = argparse.ArgumentParser(description="DistributedDataParallel synthetic benchmark")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-warmup-batches", type=int, default=10)
    p.add_argument("--num-batches-per-iter", type=int, default=10)
    p.add_argument("--num-iters", type=int, default=10)
    p.add_argument("--num-threads", type=int, default=1)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(args.num_threads)
    model = getattr(models, args.model)()
    if size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = optim.SGD(model.parameters(), lr=0.01 * size)
    data = torch.randn(args.batch_size, 3, 224, 224)
    target = torch.randint(0, 1000, (args.batch_size,))

    def benchmark_step():
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    rates = []
    for i in range(args.num_iters):
        seconds = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        rates.append(args.batch_size * args.num_batches_per_iter / seconds)
        if rank == 0:
            print(f"Iter #{i}: {rates[-1]:.1f} img/sec per CPU", flush=True)
    if rank == 0:
        mean, conf = np.mean(rates), 1.96 * np.std(rates)
        print(f"Img/sec per CPU: {mean:.1f} +-{conf:.1f}")
        print(f"Total img/sec on {size} CPU(s): {size * mean:.1f} +-{size * conf:.1f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
