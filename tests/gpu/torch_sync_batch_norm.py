"""ringlet.torch's SyncBatchNorm on CUDA inputs, for any number of ranks (run
by tests/gpu/device-check.sh under ringletrun, at np=2 with
HOROVOD_GPU_OPERATIONS=RING, the ranks sharing the machine's GPU): forward,
backward and the running statistics of every rank's part of one batch,
against torch's BatchNorm of the whole batch on the same device, in float32
and float16. Prints "torch cuda sync batch norm ok" when every check held."""

import torch

import ringlet.torch as hvd


def check_dtype(dtype, tolerance):
    r, n = hvd.rank(), hvd.size()
    g = torch.Generator().manual_seed(11)  # the same whole batch on every rank
    full = torch.randn(4 * n, 3, 7, 5, generator=g).to("cuda", dtype)
    weights = torch.randn(4 * n, 3, 7, 5, generator=g).to("cuda", dtype)
    rows = slice(4 * r, 4 * (r + 1))
    mine = full[rows].clone().requires_grad_(True)
    sync = hvd.SyncBatchNorm(3).cuda()
    out = sync(mine)
    (out.float() * weights[rows].float()).sum().backward()

    ref = torch.nn.BatchNorm2d(3).cuda()
    whole = full.float().clone().requires_grad_(True)
    ref_out = ref(whole)
    (ref_out * weights.float()).sum().backward()

    what = str(dtype).replace("torch.", "")
    for name, got in (("output", out), ("input gradient", mine.grad),
                      ("running mean", sync.running_mean), ("running var", sync.running_var),
                      ("weight gradient", sync.weight.grad)):
        assert got.is_cuda, f"{what} {name} is not on the device"
    assert out.dtype == dtype and mine.grad.dtype == dtype, f"{what}: dtypes {out.dtype}"
    assert torch.allclose(out.float(), ref_out[rows], atol=tolerance), f"{what} output"
    assert torch.allclose(mine.grad.float(), whole.grad[rows], atol=tolerance), \
        f"{what} input gradient"
    assert torch.allclose(sync.running_mean, ref.running_mean, atol=1e-5), f"{what} running mean"
    assert torch.allclose(sync.running_var, ref.running_var, atol=1e-4), f"{what} running var"
    # The weight's gradient is this rank's part; summed over the ranks, the whole's.
    total = hvd.allreduce(sync.weight.grad, op=hvd.Sum, name=f"weight_grad_{what}")
    assert torch.allclose(total, ref.weight.grad, rtol=1e-3, atol=tolerance * 10), \
        f"{what} weight gradient"


def main():
    hvd.init()
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    check_dtype(torch.float32, 1e-4)
    check_dtype(torch.float16, 2e-2)
    print("torch cuda sync batch norm ok", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
