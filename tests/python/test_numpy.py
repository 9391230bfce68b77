"""ringlet.numpy: the collectives on numpy arrays, against results computed
here from every rank's known input."""

import os

import numpy as np
import pytest

from ringlet.common import exceptions

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32,
          np.int64]


def input_of(rank, shape, dtype):
    n = int(np.prod(shape))
    return ((np.arange(n) % 7) + rank + 1).astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["Sum", "Average", "Min", "Max"])
def test_allreduce(rn, dtype, op):
    x = input_of(rn.rank(), (3, 4), dtype)
    everyone = np.stack([input_of(r, (3, 4), dtype).astype(np.float64) for r in range(rn.size())])
    want = {"Sum": everyone.sum(0), "Average": everyone.mean(0), "Min": everyone.min(0),
            "Max": everyone.max(0)}[op]
    if op == "Average" and not np.issubdtype(dtype, np.floating):
        want = np.floor(want)
    out = rn.allreduce(x, op=getattr(rn, op))
    assert out.dtype == dtype and np.allclose(out, want, rtol=1e-2)
    y = x.copy()
    assert rn.allreduce_(y, op=getattr(rn, op)) is y and np.allclose(y, want, rtol=1e-2)


def test_grouped_allreduce_and_scales(rn):
    xs = [np.ones(3, np.float32) * (rn.rank() + 1), np.ones((2, 2), np.float32)]
    a, b = rn.grouped_allreduce(xs, op=rn.Sum, postscale_factor=2.0)
    total = sum(range(1, rn.size() + 1))
    assert np.allclose(a, 2 * total) and np.allclose(b, 2 * rn.size())
    ys = [x.copy() for x in xs]
    rn.grouped_allreduce_(ys, op=rn.Max)
    assert np.allclose(ys[0], rn.size())


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.uint32, np.complex128],
                         ids=lambda d: np.dtype(d).name)
def test_allgather_broadcast_alltoall(rn, dtype):
    n = rn.size()
    x = (np.arange((rn.rank() + 1) * 2).reshape(-1, 2) + rn.rank()).astype(dtype)
    want = np.concatenate([(np.arange((r + 1) * 2).reshape(-1, 2) + r).astype(dtype)
                           for r in range(n)])
    got = rn.allgather(x)
    assert got.dtype == dtype and np.array_equal(got, want)
    b = rn.broadcast(np.full(4, rn.rank()).astype(dtype), n - 1)
    assert np.array_equal(b, np.full(4, n - 1).astype(dtype))
    rows = np.repeat(np.arange(n), 2).astype(dtype)  # two rows of value j to rank j
    out, received = rn.alltoall(rows, splits=[2] * n)
    assert received.tolist() == [2] * n
    assert np.array_equal(out, np.full(2 * n, rn.rank()).astype(dtype))


def test_empty_arrays(rn):
    # numpy 2 gives arrays without elements zero strides; they are contiguous all the same.
    n = rn.size()
    mine = np.zeros((0, 2), np.float32) if rn.rank() == 0 else np.full((1, 2), rn.rank(),
                                                                       np.float32)
    got = rn.allgather(mine)
    assert got.shape == (n - 1, 2) and got[:, 0].tolist() == list(range(1, n))
    assert rn.allreduce(np.zeros((0, 3), np.float64), op=rn.Sum).shape == (0, 3)
    out, received = rn.alltoall(np.zeros((0, 4), np.int32), splits=[0] * n)
    assert out.shape == (0, 4) and received.tolist() == [0] * n


def test_reducescatter(rn):
    n = rn.size()
    x = np.ones((n, 3), np.float32) * (rn.rank() + 1)
    out = rn.reducescatter(x, op=rn.Sum)
    assert out.shape == (1, 3) and np.allclose(out, sum(range(1, n + 1)))
    outs = rn.grouped_reducescatter([x, 2 * x], op=rn.Average)
    assert np.allclose(outs[1], 2 * sum(range(1, n + 1)) / n)


def test_objects(rn):
    assert rn.broadcast_object({"r": rn.rank()}, root_rank=0) == {"r": 0}
    assert rn.allgather_object(("x", rn.rank())) == [("x", r) for r in range(rn.size())]


def test_errors(rn):
    with pytest.raises(ValueError, match="C-contiguous"):
        rn.allreduce(np.ones((4, 4)).T)
    with pytest.raises(exceptions.MismatchError):
        rn.allreduce(np.ones(2 + rn.rank()), name="shapes")
    with pytest.raises(ValueError, match="not supported"):
        rn.allreduce(np.ones(2, dtype=np.bool_), name="bools")
    assert np.allclose(rn.allreduce(np.ones(2), op=rn.Sum), rn.size())


def test_async_and_join(rn):
    h = rn.allreduce_async(np.ones(5), op=rn.Sum)
    while not rn.poll(h):
        pass
    assert np.allclose(rn.synchronize(h), rn.size())
    assert rn.join() in range(rn.size())


def test_mpi_threads_supported_is_horovods(rn, monkeypatch):
    """Horovod's mpi_threads_supported(): ValueError where MPI is not enabled;
    where it is, whether MPI runs at MPI_THREAD_MULTIPLE, which Ringlet's own
    MPI_Init_thread (SERIALIZED) is not."""
    from ringlet.common import basics
    if basics.mpi_enabled():
        assert rn.mpi_threads_supported() is False  # this suite imports no mpi4py
    else:
        with pytest.raises(ValueError, match="MPI is not enabled in this job"):
            rn.mpi_threads_supported()
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "HOROVOD_CPU_OPERATIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RINGLET_RENDEZVOUS", "127.0.0.1:1")
    with pytest.raises(ValueError, match="MPI is not enabled in this job"):
        rn.mpi_threads_supported()


def check_build_report():
    """`ringletrun --check-build` of this build: what it says it contains."""
    import subprocess
    from pathlib import Path
    ringletrun = os.environ.get("RINGLET_TEST_RINGLETRUN") or str(
        Path(__file__).resolve().parents[2] / "build" / "bin" / "ringletrun")
    return subprocess.run([ringletrun, "--check-build"], capture_output=True, text=True,
                          check=True, timeout=120).stdout


def nccl_version_code(major, minor, patch):
    """nccl.h's NCCL_VERSION(X, Y, Z)."""
    if major <= 2 and minor <= 8:
        return major * 1000 + minor * 100 + patch
    return major * 10000 + minor * 100 + patch


def test_built_answers_are_what_check_build_says(rn):
    """Horovod's *_built(): what this build was compiled with, and for NCCL its
    version code, the same answers as `ringletrun --check-build` gives."""
    import re
    from pathlib import Path
    from ringlet.common import basics
    report = check_build_report()
    assert basics.mpi_built() is ("[X] MPI\n" in report), report
    assert basics.cuda_built() is ("CUDA kernels for architectures" in report), report
    version = re.search(r"NCCL (\d+)\.(\d+)\.(\d+) at build time", report)
    if "[X] NCCL" in report:
        assert version, report
        code = nccl_version_code(*(int(v) for v in version.groups()))
        assert basics.nccl_built() == code
        # Where the toolkit's nccl.h is this same version, its own define agrees.
        header = Path("/usr/local/cuda/include/nccl.h")
        if header.exists():
            text = header.read_text()
            parts = [re.search(rf"#define NCCL_{p} +(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
            if all(parts) and tuple(m.group(1) for m in parts) == version.groups():
                assert f"#define NCCL_VERSION_CODE {code}" in text
    else:
        assert basics.nccl_built() == 0
    assert basics.gloo_built() is False and basics.rocm_built() is False
    assert basics.ddl_built() is False and basics.ccl_built() is False
    assert rn.cuda_built() is basics.cuda_built() and rn.nccl_built() == basics.nccl_built()


def test_mpi_enabled_follows_how_mpi_is_used(rn, monkeypatch):
    """Horovod's mpi_enabled(): MPI in use at run time. With a rendezvous of
    Ringlet's own it is not, unless mpirun started the job and the host
    collectives run through MPI. (Only the environment is read, so the job this
    suite runs in, under ringletrun or mpirun, is untouched.)"""
    from ringlet.common import basics
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "HOROVOD_CPU_OPERATIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RINGLET_RENDEZVOUS", "127.0.0.1:1")
    assert basics.mpi_enabled() is False
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", str(rn.size()))
    assert basics.mpi_enabled() is False  # mpirun, but the ranks meet through the store
    monkeypatch.setenv("HOROVOD_CPU_OPERATIONS", "mpi")
    assert basics.mpi_enabled() is basics.mpi_built()
    monkeypatch.delenv("HOROVOD_CPU_OPERATIONS")
    monkeypatch.delenv("RINGLET_RENDEZVOUS")
    assert basics.mpi_enabled() is basics.mpi_built()  # mpirun, meeting through MPI
