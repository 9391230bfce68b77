"""Ranks that disagree on RINGLET_CUDA_IPC_DIRECT_BYTES (run by
tests/gpu/device-check.sh with HOROVOD_GPU_OPERATIONS=RING, 0 on rank 0 and
1 on the others): the allreduce of a large CUDA tensor must fail on every
rank with an error naming the variable, never hang or return wrong data.
Prints "direct mismatch reported" when it did."""

import torch

import ringlet.torch as hvd


def main():
    hvd.init()
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    x = torch.ones(1 << 22, device="cuda")
    try:
        hvd.allreduce(x, op=hvd.Sum, name="mismatched")
    except Exception as e:  # noqa: BLE001 - the error's text is what is checked
        assert "RINGLET_CUDA_IPC_DIRECT_BYTES" in str(e), f"unexpected error: {e}"
        print("direct mismatch reported", flush=True)
        return
    raise AssertionError("the allreduce succeeded although the ranks took different paths")


if __name__ == "__main__":
    main()
