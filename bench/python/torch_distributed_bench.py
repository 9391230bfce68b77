"""The ringlet backend of torch.distributed against Gloo, in the same job and
through the same torch.distributed calls: all_reduce (Sum, float32), or
all_gather_into_tensor / reduce_scatter_tensor, at each size, the two
backends alternating op by op, each op after a barrier of its group. A time
is an op's slowest rank's; p50, p99 and mean in microseconds, and Gloo's p50
over Ringlet's (above 1: Ringlet is faster).

    torchrun --standalone --nproc-per-node 2 bench/python/torch_distributed_bench.py \
        [--op all_reduce|all_gather_into_tensor|reduce_scatter_tensor] [4K 64M]
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

import ringlet.torch  # noqa: F401  (registers "ringlet")

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def text_of(nbytes):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def make_call(op, nbytes, size):
    n = max(1, nbytes // 4)
    if op == "all_reduce":
        x = torch.ones(n)
        return lambda group: dist.all_reduce(x, group=group)
    if op == "all_gather_into_tensor":  # nbytes: the output
        x, out = torch.ones(max(1, n // size)), torch.empty(max(1, n // size) * size)
        return lambda group: dist.all_gather_into_tensor(out, x, group=group)
    x, out = torch.ones(max(1, n // size) * size), torch.empty(max(1, n // size))
    return lambda group: dist.reduce_scatter_tensor(out, x, group=group)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--op", default="all_reduce",
                   choices=["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"])
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=0, help="per size (0: by size)")
    p.add_argument("sizes", nargs="*", default=["4K", "64M"])
    args = p.parse_args()
    lo, hi = parse_size(args.sizes[0]), parse_size(args.sizes[-1])

    dist.init_process_group("ringlet")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"ringlet": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    if rank == 0:
        print(f"# {args.op}, float32, np={size}, torch {torch.__version__}; times in us "
              "(each op's slowest rank)")
        print(f"{'bytes':>8} {'iters':>6} | {'ringlet p50':>11} {'p99':>9} {'mean':>9} | "
              f"{'gloo p50':>9} {'p99':>9} {'mean':>9} | {'gloo/ringlet':>12}")
    nbytes = lo
    while nbytes <= hi:
        iters = args.iters or max(10, min(200, (64 << 20) // nbytes))
        call = make_call(args.op, nbytes, size)
        times = {name: [] for name in groups}
        for i in range(iters + 3):
            for name, group in groups.items():
                dist.barrier(group=group)
                start = time.perf_counter()
                call(group)
                if i >= 3:
                    times[name].append(time.perf_counter() - start)
        rows = {}
        for name in groups:
            t = torch.tensor(times[name], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=groups["gloo"])
            us = sorted((t * 1e6).tolist())
            rows[name] = (statistics.median(us), us[min(len(us) - 1, int(len(us) * 0.99))],
                          statistics.fmean(us))
        if rank == 0:
            r, g = rows["ringlet"], rows["gloo"]
            print(f"{text_of(nbytes):>8} {iters:>6} | {r[0]:>11.1f} {r[1]:>9.1f} {r[2]:>9.1f} | "
                  f"{g[0]:>9.1f} {g[1]:>9.1f} {g[2]:>9.1f} | {g[0] / r[0]:>12.2f}", flush=True)
        nbytes *= args.factor
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
