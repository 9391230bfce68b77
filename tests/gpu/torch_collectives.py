"""Every collective of ringlet.torch on CUDA tensors, checked against the
arithmetic done on the host, for any number of ranks (run by
tests/gpu/device-check.sh under ringletrun, with NCCL on one rank per GPU or
with HOROVOD_GPU_OPERATIONS=RING and several ranks sharing one).
Prints "torch cuda collectives ok" when every check held."""

import torch

import ringlet.torch as hvd


def main():
    hvd.init()
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    r, n = hvd.rank(), hvd.size()
    ranks = torch.arange(n, dtype=torch.float64)

    def check(got, want, what):
        assert got.is_cuda, f"{what}: the result is not on the device"
        assert torch.equal(got.cpu(), want.cpu()), f"{what}: {got} != {want}"

    base = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    x = base + r
    check(hvd.allreduce(x, op=hvd.Sum, name="sum"), base * n + float(ranks.sum()), "allreduce")
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Average, prescale_factor=2.0, postscale_factor=0.5, name="avg")
    check(y, base + float(ranks.mean()), "allreduce_ with scales")
    parts = [torch.full((m,), float(r + 1), device="cuda") for m in (1, 3, 4097)]
    total = float((ranks + 1).sum())
    for got, m in zip(hvd.grouped_allreduce(parts, op=hvd.Sum, name="grouped"), (1, 3, 4097)):
        check(got, torch.full((m,), total, device="cuda"), "grouped allreduce")
    h = (base[:4099] + r).half()
    check(hvd.allreduce(h, op=hvd.Max, name="max"), (base[:4099] + n - 1).half(), "float16 max")
    ints = torch.full((1001,), 2 * (r + 1), dtype=torch.int32, device="cuda")
    check(hvd.allreduce(ints, op=hvd.Average, name="ints"),
          torch.full((1001,), (n + 1), dtype=torch.int32), "int32 average")

    # Views into one larger allocation, off its start and off 16 bytes, in
    # place, a few steps on the same allocation (with
    # RINGLET_CUDA_IPC_DIRECT_BYTES small: read and written in the peers'
    # own memory, the allocation opened once).
    big = torch.zeros(3 << 20, device="cuda")
    for step in range(3):
        view = big[1001 + step:1001 + step + (1 << 20)]
        view.copy_(base + r + step)
        hvd.allreduce_(view, op=hvd.Average, name=f"view{step}")
        check(view, base + float(ranks.mean()) + step, "allreduce_ of a view")

    b = torch.full((4099,), float(r), device="cuda")
    hvd.broadcast_(b, root_rank=n - 1, name="bcast")
    check(b, torch.full((4099,), float(n - 1)), "broadcast_")

    rows = torch.full((r + 1, 3), float(r), device="cuda")
    want = torch.cat([torch.full((k + 1, 3), float(k)) for k in range(n)])
    check(hvd.allgather(rows, name="gather"), want, "allgather of uneven rows")
    flags = torch.tensor([True, False, r % 2 == 0], device="cuda")
    gathered = hvd.allgather(flags, name="flags")
    assert gathered.dtype == torch.bool and gathered.shape == (3 * n,), "allgather of bool"

    d0 = 4 * n + 1
    share = [d0 // n + (1 if k < d0 % n else 0) for k in range(n)]
    scattered = hvd.reducescatter(torch.full((d0, 3), float(r + 1), device="cuda"), op=hvd.Sum,
                                  prescale_factor=2.0, postscale_factor=0.5, name="scatter")
    check(scattered, torch.full((share[r], 3), total), "reducescatter with scales")

    splits = [k + 1 for k in range(n)]  # rank r sends k + 1 rows to rank k
    send = torch.cat([torch.full((k + 1, 2), float(100 * r + k)) for k in range(n)]).cuda()
    got, received = hvd.alltoall(send, splits=splits, name="exchange")
    want = torch.cat([torch.full((r + 1, 2), float(100 * k + r)) for k in range(n)])
    check(got, want, "alltoall")
    assert received.tolist() == [r + 1] * n, f"alltoall received {received.tolist()}"

    print("torch cuda collectives ok", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
