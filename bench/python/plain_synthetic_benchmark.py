"""The peer of examples/pytorch_synthetic_benchmark.py with no communication
library: the same torchvision model, optimizer, random batch, steps and
timing loop in plain PyTorch on one GPU (or the CPU), so that the example's
rate at one rank can be read as a share of this one, measured on the same
machine in the same run:

    python3 bench/python/plain_synthetic_benchmark.py --model resnet50 --batch-size 64

It prints the example's lines ("Img/sec per GPU: R +-C"). Like the example,
it times the steps as the host queues them, with no synchronization of its
own, so that both loops are timed alike.
"""

import argparse
import timeit

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models


def parse_args():
    p = argparse.ArgumentParser(description="plain PyTorch synthetic benchmark")
    p.add_argument("--model", default="resnet50", help="a torchvision model name")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-warmup-batches", type=int, default=10)
    p.add_argument("--num-batches-per-iter", type=int, default=10)
    p.add_argument("--num-iters", type=int, default=10)
    p.add_argument("--num-threads", type=int, default=1, help="intra-op threads")
    p.add_argument("--no-cuda", action="store_true")
    return p.parse_args()


def main():
    args = parse_args()
    cuda = not args.no_cuda and torch.cuda.is_available()
    torch.set_num_threads(args.num_threads)
    device = "cuda" if cuda else "cpu"

    model = getattr(models, args.model)().to(device)
    # The example's learning rate at one rank (0.01 x ranks).
    optimizer = optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(args.batch_size, 3, 224, 224, device=device)
    target = torch.randint(0, 1000, (args.batch_size,), device=device)

    def benchmark_step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    print(f"Model: {args.model}")
    print(f"Batch size: {args.batch_size}")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    rates = []
    for i in range(args.num_iters):
        seconds = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        rate = args.batch_size * args.num_batches_per_iter / seconds
        print(f"Iter #{i}: {rate:.1f} img/sec per {device.upper()}", flush=True)
        rates.append(rate)
    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    print(f"Img/sec per {device.upper()}: {mean:.1f} +-{conf:.1f}", flush=True)


if __name__ == "__main__":
    main()
