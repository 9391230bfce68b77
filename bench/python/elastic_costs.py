"""What elastic training costs, run as an elastic job's worker:

    ringletrun -np 2 --min-np 1 --max-np 2 --host-discovery-script S \
        python bench/python/elastic_costs.py [--model resnet18] [--commits 20]

Times state.commit() of a TorchState holding the model and an SGD optimizer
with momentum (its state filled by one step): the copy of both state_dicts
and the check with the driver for host changes (a round trip and a
broadcast). Rank 0 prints p50, p99 and the mean in milliseconds."""

import argparse
import statistics
import time

import torch
import torchvision

import ringlet.torch as hvd


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18")
    p.add_argument("--commits", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    model = getattr(torchvision.models, args.model)()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model(torch.randn(1, 3, 64, 64)).sum().backward()
    optimizer.step()
    state = hvd.elastic.TorchState(model, optimizer, epoch=0)
    hvd.barrier()
    times = []
    for _ in range(args.commits):
        start = time.perf_counter()
        state.commit()
        times.append((time.perf_counter() - start) * 1e3)
    if hvd.rank() == 0:
        params = sum(t.numel() for t in model.state_dict().values())
        times.sort()
        print(f"commit of {args.model} ({params * 4 / 2**20:.1f} MiB of model state, as much "
              f"again of momentum), {hvd.size()} workers, {args.commits} commits: "
              f"p50 {statistics.median(times):.1f} ms, "
              f"p99 {times[min(len(times) - 1, int(len(times) * 0.99))]:.1f} ms, "
              f"mean {statistics.fmean(times):.1f} ms")
    hvd.shutdown()


if __name__ == "__main__":
    main()
