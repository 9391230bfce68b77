"""Training through torch.distributed on the ringlet backend against Gloo, in
the same job: DDP of torchvision's resnet18 (images/s), or FSDP2
(`fully_shard`) of an MLP (step time). Each backend trains its own copy of
the model from one seed, the two alternating step by step, each step after
its group's barrier; a step's time is its slowest rank's. Prints the median
and the mean over the measured steps, and Gloo's median over Ringlet's
(above 1: Ringlet is faster).

    torchrun --standalone --nproc-per-node 2 bench/python/torch_training_bench.py \
        [--model resnet18|fsdp2-mlp] [--steps 20] [--batch 16] [--image 64]
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

import ringlet.torch  # noqa: F401  (registers "ringlet")


def resnet18_ddp(group, args):
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1 + dist.get_rank())
    x = torch.randn(args.batch, 3, args.image, args.image, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return step, sum(p.numel() for p in model.parameters())


def mlp_fsdp2(group, args):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    width = args.width
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    mesh = DeviceMesh.from_group(group, "cpu")
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1 + dist.get_rank())
    x = torch.randn(args.batch, width, generator=g)

    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    return step, sum(p.numel() for p in model.parameters())  # DTensors: the whole size


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18", choices=["resnet18", "fsdp2-mlp"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=16, help="per rank")
    p.add_argument("--image", type=int, default=64, help="resnet18: image side")
    p.add_argument("--width", type=int, default=1024, help="fsdp2-mlp: layer width")
    p.add_argument("--layers", type=int, default=8, help="fsdp2-mlp: linear layers")
    args = p.parse_args()

    dist.init_process_group("ringlet")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"ringlet": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    build = resnet18_ddp if args.model == "resnet18" else mlp_fsdp2
    steps, params = {}, 0
    for name, group in groups.items():
        steps[name], params = build(group, args)
    times = {name: [] for name in groups}
    for i in range(args.warmup + args.steps):
        for name, group in groups.items():
            dist.barrier(group=group)
            start = time.perf_counter()
            steps[name]()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)
    slowest = {}
    for name in groups:
        t = torch.tensor(times[name], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=groups["gloo"])
        slowest[name] = t.tolist()
    if rank == 0:
        print(f"# {args.model}, {params / 1e6:.1f}M parameters, np={size}, batch {args.batch} per "
              f"rank, {args.steps} steps after {args.warmup}, torch {torch.__version__}")
        for name in groups:
            med, mean = statistics.median(slowest[name]), statistics.mean(slowest[name])
            extra = (f", {args.batch * size / med:.1f} images/s"
                     if args.model == "resnet18" else "")
            print(f"{name:>8}: step median {med * 1e3:.1f} ms, mean {mean * 1e3:.1f} ms{extra}")
        ratio = statistics.median(slowest["gloo"]) / statistics.median(slowest["ringlet"])
        print(f"gloo/ringlet (median step): {ratio:.2f}")
    dist.destroy_process_group(groups["gloo"])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
