"""A rank of a ringlet process group dies between two collectives: the
survivor's next all_reduce fails at once with PyTorch's DistBackendError
naming the lost rank, rather than waiting for the group's timeout. Run under
ringletrun -np 2 (which then exits non-zero for the dead rank: the test
passes on the survivor's line)."""

import os
import sys
import time

import torch
import torch.distributed as dist

import ringlet.torch  # noqa: F401  (registers the backend)

dist.init_process_group("ringlet", init_method="ringlet://")
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
assert t.tolist() == [2.0] * 4, t
if rank == 1:
    os._exit(3)
start = time.monotonic()
try:
    dist.all_reduce(torch.ones(1 << 16))
except dist.DistBackendError as e:
    took = time.monotonic() - start
    print(f"survivor rank {rank} failed after {took:.2f} s: {e}", flush=True)
    sys.exit(0 if took < 10 else 1)
print("survivor: the all_reduce with a dead peer did not fail", flush=True)
sys.exit(1)
