"""The GPU job as users run it: each rank on its own GPU
(torch.cuda.set_device(hvd.local_rank())), or on the one GPU its
CUDA_VISIBLE_DEVICES leaves it. Run by tests/gpu/device-check.sh under
ringletrun with NCCL and with RING. Checks, for every collective:
- the values, against the arithmetic done on the host;
- the result lies on the input's device, and the current device is the
  one the rank chose, before and after;
- with --empty-cache, torch.cuda.empty_cache() between steps, so that the
  allocations a peer opened through CUDA IPC are freed and made anew;
and at the end that every rank's process holds a CUDA context on one GPU
only (nvidia-smi --query-compute-apps), where nvidia-smi can see the
processes. Prints "own gpu ok" on each rank when every check held."""

import argparse
import os
import subprocess

import torch

import ringlet.torch as hvd


def contexts_by_pid():
    """{pid: set of GPU UUIDs} of the processes nvidia-smi sees; None where it
    cannot tell (no nvidia-smi, or another PID namespace)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            found.setdefault(int(parts[0]), set()).add(parts[1])
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--empty-cache", action="store_true")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    hvd.init()
    device = hvd.local_rank() % torch.cuda.device_count()
    torch.cuda.set_device(device)
    r, n = hvd.rank(), hvd.size()
    where = torch.device("cuda", device)

    def check(got, want, what):
        assert got.device == where, f"rank {r}: {what}: the result is on {got.device}, not {where}"
        assert torch.cuda.current_device() == device, (
            f"rank {r}: {what}: the current device became cuda:{torch.cuda.current_device()}")
        assert torch.equal(got.cpu(), want.cpu()), f"rank {r}: {what}: {got} != {want}"

    total = float(sum(k + 1 for k in range(n)))
    for step in range(args.steps):
        if args.empty_cache:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        # Sizes both below and above RINGLET_CUDA_IPC_DIRECT_BYTES' default
        # (the window, and the ranks' own buffers).
        for count in (1000, 3 << 20):
            x = torch.full((count,), float(r + 1 + step), device=where)
            check(hvd.allreduce(x, op=hvd.Sum, name=f"sum{count}.{step}"),
                  torch.full((count,), total + n * step), f"allreduce of {count}")
            y = x.clone()
            hvd.allreduce_(y, op=hvd.Average, name=f"avg{count}.{step}")
            check(y, torch.full((count,), total / n + step), f"allreduce_ of {count}")
        b = torch.full((4099,), float(r), device=where)
        hvd.broadcast_(b, root_rank=n - 1, name=f"bcast.{step}")
        check(b, torch.full((4099,), float(n - 1)), "broadcast_")
        rows = torch.full((r + 1, 3), float(r), device=where)
        want = torch.cat([torch.full((k + 1, 3), float(k)) for k in range(n)])
        check(hvd.allgather(rows, name=f"gather.{step}"), want, "allgather")
        scattered = hvd.reducescatter(torch.full((2 * n, 3), float(r + 1), device=where),
                                      op=hvd.Sum, name=f"scatter.{step}")
        check(scattered, torch.full((2, 3), total), "reducescatter")
        send = torch.cat([torch.full((1, 2), float(100 * r + k)) for k in range(n)]).to(where)
        got = hvd.alltoall(send, name=f"exchange.{step}")
        check(got, torch.tensor([[float(100 * k + r)] * 2 for k in range(n)]), "alltoall")

    torch.cuda.synchronize()
    pids = hvd.allgather_object(os.getpid(), name="pids")
    if r == 0:
        contexts = contexts_by_pid()
        if contexts is None or not any(p in contexts for p in pids):
            print("contexts: nvidia-smi cannot see these processes", flush=True)
        else:
            for rank, pid in enumerate(pids):
                gpus = contexts.get(pid, set())
                assert len(gpus) == 1, f"rank {rank} (pid {pid}) holds contexts on {sorted(gpus)}"
            print(f"contexts: each of {n} ranks on one GPU", flush=True)
    hvd.barrier()
    print("own gpu ok", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
