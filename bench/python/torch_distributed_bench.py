"""The ringlet backend of torch.distributed against Gloo, in the same job and
through the same torch.distributed calls: all_reduce (Sum, float32), or
all_gather_into_tensor / reduce_scatter_tensor, at each size, the two
backends alternating op by op, each op after a barrier of its group. A time
is an op's slowest rank's; p50, p99 and mean in microseconds, and Gloo's p50
over Ringlet's (above 1: Ringlet is faster).

    torchrun --standalone --nproc-per-node 2 bench/python/torch_distributed_bench.py \
        [--op all_reduce|all_gather_into_tensor|reduce_scatter_tensor] [4K 64M]

--per-call SIZE: what one synchronous all_reduce costs, back to back with no
barrier between calls (p50 over 3000 calls, at the slowest rank's p50):
through torch.distributed (dist.all_reduce), through the backend beneath it
(the C++ Backend's allreduce and wait, without torch's Python and
dispatcher), and through ringlet.torch (hvd.allreduce_); compare with
`ringlet-bench allreduce -b SIZE -e SIZE --tensors 1 -n 3000` (the C++ API).
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


def per_call(nbytes, calls=3000, warmup=300):
    """p50 of back-to-back synchronous all_reduces, in us, at the slowest rank."""
    import ringlet.torch as hvd
    x = torch.ones(max(1, nbytes // 4))
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    ways = {"dist.all_reduce": lambda: dist.all_reduce(x),
            "backend allreduce+wait": lambda: backend.allreduce([x]).wait(),
            "hvd.allreduce_": lambda: hvd.allreduce_(x, op=hvd.Sum, name="per_call")}
    p50s = {}
    for way, call in ways.items():
        times = []
        for i in range(warmup + calls):
            start = time.perf_counter()
            call()
            if i >= warmup:
                times.append(time.perf_counter() - start)
        p50 = torch.tensor([statistics.median(times) * 1e6], dtype=torch.float64)
        dist.all_reduce(p50, op=dist.ReduceOp.MAX)
        p50s[way] = p50.item()
    return p50s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--op", default="all_reduce",
                   choices=["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"])
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=0, help="per size (0: by size)")
    p.add_argument("--per-call", metavar="SIZE", help="per-call cost at SIZE (see above)")
    p.add_argument("sizes", nargs="*", default=["4K", "64M"])
    args = p.parse_args()
    lo, hi = parse_size(args.sizes[0]), parse_size(args.sizes[-1])

    dist.init_process_group("ringlet")
    rank, size = dist.get_rank(), dist.get_world_size()
    if args.per_call:
        torch.set_num_threads(1)
        p50s = per_call(parse_size(args.per_call))
        if rank == 0:
            print(f"# synchronous all_reduce of {args.per_call}, float32, np={size}, back to "
                  "back: p50 in us (the slowest rank's)")
            for way, us in p50s.items():
                print(f"{way:>24} {us:>8.1f}")
        dist.destroy_process_group()
        return
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
