"""Horovod's synthetic benchmark on ringlet.torch: a torchvision model trained
on random data, reporting images per second per rank and in total.

    ringletrun -np 2 python examples/pytorch_synthetic_benchmark.py --model resnet18 --batch-size 16
"""

import argparse
import timeit

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models

import ringlet.torch as hvd


def parse_args():
    p = argparse.ArgumentParser(description="ringlet.torch synthetic benchmark")
    p.add_argument("--fp16-allreduce", action="store_true")
    p.add_argument("--model", default="resnet50", help="a torchvision model name")
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--num-warmup-batches", type=int, default=10)
    p.add_argument("--num-batches-per-iter", type=int, default=10)
    p.add_argument("--num-iters", type=int, default=10)
    p.add_argument("--num-threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--no-cuda", action="store_true")
    return p.parse_args()


def main():
    args = parse_args()
    cuda = not args.no_cuda and torch.cuda.is_available() and hvd.cuda_built()
    hvd.init()
    torch.set_num_threads(args.num_threads)
    if cuda:
        # One GPU per local rank; more ranks than GPUs share them in turn.
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    device = "cuda" if cuda else "cpu"

    model = getattr(models, args.model)().to(device)
    optimizer = optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    data = torch.randn(args.batch_size, 3, 224, 224, device=device)
    target = torch.randint(0, 1000, (args.batch_size,), device=device)

    def benchmark_step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    def log(text):
        if hvd.rank() == 0:
            print(text, flush=True)

    log(f"Model: {args.model}")
    log(f"Batch size: {args.batch_size}")
    log(f"Number of {device.upper()}s: {hvd.size()}")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    rates = []
    for i in range(args.num_iters):
        seconds = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        rate = args.batch_size * args.num_batches_per_iter / seconds
        log(f"Iter #{i}: {rate:.1f} img/sec per {device.upper()}")
        rates.append(rate)
    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    log(f"Img/sec per {device.upper()}: {mean:.1f} +-{conf:.1f}")
    log(f"Total img/sec on {hvd.size()} {device.upper()}(s): {hvd.size() * mean:.1f} "
        f"+-{hvd.size() * conf:.1f}")
    hvd.shutdown()


if __name__ == "__main__":
    main()
