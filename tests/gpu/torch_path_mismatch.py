"""Ranks that disagree on how a large allreduce goes between them (run by
tests/gpu/device-check.sh with HOROVOD_GPU_OPERATIONS=RING and rank 0's
RINGLET_CUDA_IPC_DIRECT_BYTES or RINGLET_ALGORITHM set apart from the
others'): every rank must fail with an error naming the variable given as
the argument, never hang or return wrong data. init() compares these
settings across ranks (docs/environment.md), so that is where it fails; the
allreduce of a large CUDA tensor checks the paths the ranks took as well.
Prints "path mismatch reported" when it did."""

import sys

import torch

import ringlet.torch as hvd


def main():
    variable = sys.argv[1]
    try:
        hvd.init()
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        x = torch.ones(1 << 22, device="cuda")
        hvd.allreduce(x, op=hvd.Sum, name="mismatched")
    except Exception as e:  # noqa: BLE001 - the error's text is what is checked
        assert variable in str(e), f"unexpected error: {e}"
        print("path mismatch reported", flush=True)
        return
    raise AssertionError("the allreduce succeeded although the ranks took different paths")


if __name__ == "__main__":
    main()
