"""Every ringlet.torch collective, for every dtype it serves, in place and
not, synchronous and asynchronous, against results computed here from every
rank's known input."""

import inspect

import pytest
import torch

from conftest import input_of

# uint16 exists from PyTorch 2.3 on; older versions simply lack it.
REDUCIBLE = [getattr(torch, name) for name in (
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "uint16", "int32",
    "int64") if hasattr(torch, name)]
MOVABLE = REDUCIBLE + [torch.bool, torch.complex64]


def expected_reduction(hvd, op, shape, dtype, ranks=None):
    ranks = list(range(hvd.size())) if ranks is None else ranks
    inputs = torch.stack([input_of(r, shape, dtype).to(torch.float64) for r in ranks])
    if op == hvd.Sum:
        out = inputs.sum(0)
    elif op == hvd.Average:
        out = inputs.sum(0) / len(ranks)
        if not dtype.is_floating_point:
            out = torch.floor(out)
    elif op == hvd.Min:
        out = inputs.min(0).values
    elif op == hvd.Max:
        out = inputs.max(0).values
    else:
        out = inputs.prod(0)
    return out


def close(actual, expected, dtype):
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-6)
    return torch.allclose(actual.to(torch.float64), expected, rtol=tol, atol=tol)


def test_job_shape(rt):
    assert 0 <= rt.rank() < rt.size()
    assert 0 <= rt.local_rank() < rt.local_size()
    assert rt.cross_size() >= 1 and 0 <= rt.cross_rank() < rt.cross_size()
    assert rt.is_initialized() and rt.is_homogeneous()
    # What the build has is test_numpy.py's to check against --check-build.
    assert isinstance(rt.nccl_built(), int) and isinstance(rt.cuda_built(), bool)
    assert rt.rocm_built() is False and rt.gloo_built() is False
    assert isinstance(rt.mpi_built(), bool)


@pytest.mark.parametrize("dtype", REDUCIBLE, ids=str)
@pytest.mark.parametrize("op", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce(rt, dtype, op):
    op = getattr(rt, op)
    if op == rt.Product and dtype in (torch.int8, torch.uint8):
        shape = (3,)  # keep the product inside the type's range
    else:
        shape = (2, 5)
    x = input_of(rt.rank(), shape, dtype)
    if dtype in (torch.int8, torch.uint8) and op == rt.Product:
        x = torch.ones(shape, dtype=dtype) + (rt.rank() % 2)
        want = torch.full(shape, float(2 ** (rt.size() // 2)), dtype=torch.float64)
    else:
        want = expected_reduction(rt, op, shape, dtype)
    before = x.clone()
    out = rt.allreduce(x, op=op, name="x")
    assert torch.equal(x, before), "allreduce changed its input"
    assert out.dtype == dtype and out.shape == x.shape
    assert close(out, want, dtype), (out, want)
    # in place, and asynchronous
    y = x.clone()
    assert rt.allreduce_(y, op=op, name="y") is y
    assert close(y, want, dtype)
    z = x.clone()
    handle = rt.allreduce_async_(z, op=op, name="z")
    assert rt.synchronize(handle) is z and close(z, want, dtype)
    out = rt.synchronize(rt.allreduce_async(x, op=op))
    assert close(out, want, dtype)


def test_allreduce_defaults_to_average_and_takes_the_deprecated_average(rt):
    x = input_of(rt.rank(), (4,), torch.float32)
    mean = expected_reduction(rt, rt.Average, (4,), torch.float32)
    assert close(rt.allreduce(x), mean, torch.float32)
    with pytest.warns(DeprecationWarning):
        total = rt.allreduce(x, average=False)
    assert close(total, mean * rt.size(), torch.float32)
    with pytest.raises(ValueError):
        rt.allreduce(x, average=True, op=rt.Sum)


def test_prescale_and_postscale(rt):
    x = input_of(rt.rank(), (6,), torch.float64)
    total = expected_reduction(rt, rt.Sum, (6,), torch.float64)
    out = rt.allreduce(x, op=rt.Sum, prescale_factor=0.5, postscale_factor=3.0)
    assert torch.allclose(out, total * 1.5)
    out = rt.allreduce(x, op=rt.Average, prescale_factor=2.0)
    assert torch.allclose(out, total * 2.0 / rt.size())
    rs = rt.reducescatter(torch.stack([x] * rt.size()), op=rt.Sum, postscale_factor=0.25)
    assert torch.allclose(rs, (total * 0.25).unsqueeze(0))


def test_scalars_and_empty_tensors(rt):
    out = rt.allreduce(torch.tensor(float(rt.rank() + 1)), op=rt.Sum)
    assert out.shape == () and out.item() == sum(range(1, rt.size() + 1))
    empty = rt.allreduce(torch.empty(0, 3), op=rt.Sum)
    assert empty.shape == (0, 3)


def test_compression_fp16(rt):
    x = input_of(rt.rank(), (8,), torch.float32)
    out = rt.allreduce(x, op=rt.Sum, compression=rt.Compression.fp16)
    assert out.dtype == torch.float32
    assert close(out, expected_reduction(rt, rt.Sum, (8,), torch.float32), torch.float16)


def test_grouped_allreduce(rt):
    shapes = [(3,), (2, 2), (5,)]
    xs = [input_of(rt.rank(), s, torch.float32, salt=i) for i, s in enumerate(shapes)]
    outs = rt.grouped_allreduce(xs, op=rt.Sum, name="g")
    for i, (s, out) in enumerate(zip(shapes, outs)):
        want = sum(input_of(r, s, torch.float32, salt=i).double() for r in range(rt.size()))
        assert torch.allclose(out.double(), want)
    assert isinstance(outs, list)
    ys = [x.clone() for x in xs]
    in_place = rt.grouped_allreduce_(ys, op=rt.Max)
    assert isinstance(in_place, tuple) and all(a is b for a, b in zip(in_place, ys))


def test_grouped_async_forms_return_one_handle(rt):
    # As in Horovod: one handle per group, whose synchronize() gives a tuple
    # of every output; poll() says whether all of them are done.
    n, me = rt.size(), rt.rank()
    xs = [input_of(me, (3,), torch.float32), input_of(me, (2, 2), torch.float32, salt=1)]
    handle = rt.grouped_allreduce_async(xs, op=rt.Sum)
    assert isinstance(handle, int)
    while not rt.poll(handle):
        pass
    reduced = rt.synchronize(handle)
    assert isinstance(reduced, tuple) and len(reduced) == 2
    for i, (x, out) in enumerate(zip(xs, reduced)):
        want = sum(input_of(r, tuple(x.shape), torch.float32, salt=i).double() for r in range(n))
        assert out is not x and torch.allclose(out.double(), want)
    assert rt.synchronize(handle) is None  # synchronized already

    ys = [x.clone() for x in xs]
    in_place = rt.synchronize(rt.grouped_allreduce_async_(ys, op=rt.Sum))
    assert isinstance(in_place, tuple) and all(a is b for a, b in zip(in_place, ys))

    gathered = rt.synchronize(rt.grouped_allgather_async(
        [torch.full((me + 1,), float(me)), torch.ones(2, 2) * me]))
    assert isinstance(gathered, tuple) and len(gathered) == 2
    assert gathered[0].tolist() == [float(r) for r in range(n) for _ in range(r + 1)]
    assert torch.equal(gathered[1], torch.cat([torch.ones(2, 2) * r for r in range(n)]))

    shares = rt.synchronize(rt.grouped_reducescatter_async(
        [torch.ones(n, 2) * (me + 1), torch.ones(2 * n) * 2], op=rt.Sum))
    total = n * (n + 1) / 2
    assert isinstance(shares, tuple)
    assert torch.equal(shares[0], torch.full((1, 2), total))
    assert torch.equal(shares[1], torch.full((2,), 2.0 * n))


@pytest.mark.parametrize("dtype", MOVABLE, ids=str)
def test_allgather(rt, dtype):
    rows = rt.rank() + 1  # ranks differ in dimension 0
    x = input_of(rt.rank(), (rows, 3), dtype if dtype != torch.complex64 else torch.float32)
    if dtype == torch.complex64:
        x = torch.complex(x, -x)
    out = rt.allgather(x, name="ag")
    parts = []
    for r in range(rt.size()):
        p = input_of(r, (r + 1, 3), dtype if dtype != torch.complex64 else torch.float32)
        parts.append(torch.complex(p, -p) if dtype == torch.complex64 else p)
    want = torch.cat(parts)
    assert out.dtype == dtype and torch.equal(out, want)
    assert torch.equal(rt.synchronize(rt.allgather_async(x)), want)


def test_grouped_allgather(rt):
    xs = [torch.full((rt.rank() + 1,), float(rt.rank())), torch.ones(2, 2) * rt.rank()]
    outs = rt.grouped_allgather(xs, name="gg")
    assert isinstance(outs, tuple)
    assert outs[0].tolist() == [float(r) for r in range(rt.size()) for _ in range(r + 1)]
    assert outs[1].shape == (2 * rt.size(), 2)


@pytest.mark.parametrize("dtype", MOVABLE, ids=str)
def test_broadcast(rt, dtype):
    for root in range(rt.size()):
        x = input_of(rt.rank(), (2, 3), dtype if dtype != torch.complex64 else torch.float32)
        if dtype == torch.complex64:
            x = torch.complex(x, x)
        want = input_of(root, (2, 3), dtype if dtype != torch.complex64 else torch.float32)
        if dtype == torch.complex64:
            want = torch.complex(want, want)
        before = x.clone()
        out = rt.broadcast(x, root, name=f"b{root}")
        assert torch.equal(out, want) and torch.equal(x, before)
        assert rt.broadcast_(x, root, name=f"b_{root}") is x and torch.equal(x, want)


def test_broadcast_async(rt):
    x = torch.full((4,), float(rt.rank()))
    h = rt.broadcast_async(x, 0)
    y = torch.full((4,), float(rt.rank()))
    h_ = rt.broadcast_async_(y, rt.size() - 1)
    assert torch.equal(rt.synchronize(h), torch.zeros(4))
    rt.synchronize(h_)
    assert torch.equal(y, torch.full((4,), float(rt.size() - 1)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_alltoall(rt, dtype):
    n = rt.size()
    # rank r sends j + 1 rows to rank j, each row holding (r, j)
    splits = [j + 1 for j in range(n)]
    rows = [torch.tensor([[r_, j]]) for r_ in [rt.rank()] for j in range(n) for _ in range(j + 1)]
    x = torch.cat(rows).to(dtype)
    out, received = rt.alltoall(x, splits=splits, name="a2a")
    assert received.tolist() == [rt.rank() + 1] * n
    want = torch.cat([torch.tensor([[r, rt.rank()]] * (rt.rank() + 1)) for r in range(n)])
    assert torch.equal(out, want.to(dtype))
    even = rt.alltoall(torch.arange(2 * n) + 100 * rt.rank())
    assert even.tolist() == [100 * r + 2 * rt.rank() + k for r in range(n) for k in range(2)]
    splits_tensor = torch.tensor(splits, dtype=torch.int32)
    out2, _ = rt.synchronize(rt.alltoall_async(x, splits=splits_tensor))
    assert torch.equal(out2, out)
    # As in Horovod, rows past the splits' sum stay here.
    extra = torch.cat([x, torch.ones(2, 2).to(dtype)])
    out3, received3 = rt.alltoall(extra, splits=splits, name="a2a_extra")
    assert torch.equal(out3, want.to(dtype)) and received3.tolist() == received.tolist()


@pytest.mark.parametrize("op", ["Sum", "Average", "Max"])
def test_reducescatter(rt, op):
    op = getattr(rt, op)
    n = rt.size()
    rows = 2 * n + 1  # uneven: the first member gets one row more
    x = input_of(rt.rank(), (rows, 2), torch.float32)
    full = expected_reduction(rt, op, (rows, 2), torch.float32)
    share = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    start = sum(share[:rt.rank()])
    out = rt.reducescatter(x, op=op, name="rs")
    assert torch.allclose(out.double(), full[start:start + share[rt.rank()]])
    outs = rt.grouped_reducescatter([x, x * 2], op=op)
    assert isinstance(outs, list)
    assert torch.allclose(outs[1].double(), 2 * full[start:start + share[rt.rank()]])


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_sparse_allreduce_async(rt, op):
    # Every rank's entries, in rank order and not coalesced: rank r holds
    # row r % 4 and row 4 of a (5, 2) tensor.
    n, me = rt.size(), rt.rank()

    def sparse_of(rank):
        dense = torch.zeros(5, 2)
        dense[rank % 4] = torch.tensor([rank + 1.0, 2.0])
        dense[4] = torch.tensor([10.0 * (rank + 1), 0.5])
        return dense.to_sparse(1)

    wait = rt.sparse_allreduce_async(sparse_of(me), name=f"sparse.{op}", op=getattr(rt, op))
    assert callable(wait)
    out = wait()
    divisor = n if op == "Average" else 1
    assert out.is_sparse and not out.is_coalesced() and tuple(out.shape) == (5, 2)
    assert torch.equal(out._indices(), torch.cat([sparse_of(r)._indices() for r in range(n)], 1))
    assert torch.allclose(out._values(),
                          torch.cat([sparse_of(r)._values() for r in range(n)]) / divisor)
    assert torch.allclose(out.to_dense(), sum(sparse_of(r).to_dense() for r in range(n)) / divisor)


# Horovod 0.28.1's public torch functions: their parameters in order with
# the defaults (horovod/torch/mpi_ops.py, functions.py, optimizer.py).
# Ringlet may add parameters after them, each with a default.
HOROVOD_SIGNATURES = {
    "allreduce": "tensor, average=None, name=None, compression=Compression.none, op=None, "
                 "prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set",
    "allreduce_async": "tensor, average=None, name=None, op=None, prescale_factor=1.0, "
                       "postscale_factor=1.0, process_set=global_process_set",
    "allreduce_": "tensor, average=None, name=None, op=None, prescale_factor=1.0, "
                  "postscale_factor=1.0, process_set=global_process_set",
    "allreduce_async_": "tensor, average=None, name=None, op=None, prescale_factor=1.0, "
                        "postscale_factor=1.0, process_set=global_process_set",
    "grouped_allreduce": "tensors, average=None, name=None, compression=Compression.none, "
                         "op=None, prescale_factor=1.0, postscale_factor=1.0, "
                         "process_set=global_process_set",
    "grouped_allreduce_async": "tensors, average=None, name=None, op=None, "
                               "prescale_factor=1.0, postscale_factor=1.0, "
                               "process_set=global_process_set",
    "grouped_allreduce_": "tensors, average=None, name=None, op=None, prescale_factor=1.0, "
                          "postscale_factor=1.0, process_set=global_process_set",
    "grouped_allreduce_async_": "tensors, average=None, name=None, op=None, "
                                "prescale_factor=1.0, postscale_factor=1.0, "
                                "process_set=global_process_set",
    "sparse_allreduce_async": "tensor, name, op, process_set=global_process_set",
    "allgather": "tensor, name=None, process_set=global_process_set",
    "allgather_async": "tensor, name=None, process_set=global_process_set",
    "grouped_allgather": "tensors, name=None, process_set=global_process_set",
    "grouped_allgather_async": "tensors, name=None, process_set=global_process_set",
    "broadcast": "tensor, root_rank, name=None, process_set=global_process_set",
    "broadcast_async": "tensor, root_rank, name=None, process_set=global_process_set",
    "broadcast_": "tensor, root_rank, name=None, process_set=global_process_set",
    "broadcast_async_": "tensor, root_rank, name=None, process_set=global_process_set",
    "alltoall": "tensor, splits=None, name=None, process_set=global_process_set",
    "alltoall_async": "tensor, splits=None, name=None, process_set=global_process_set",
    "reducescatter": "tensor, name=None, compression=Compression.none, op=Average, "
                     "process_set=global_process_set, prescale_factor=1.0, "
                     "postscale_factor=1.0",
    "reducescatter_async": "tensor, name=None, op=Average, process_set=global_process_set, "
                           "prescale_factor=1.0, postscale_factor=1.0",
    "grouped_reducescatter": "tensors, name=None, compression=Compression.none, op=Average, "
                             "process_set=global_process_set, prescale_factor=1.0, "
                             "postscale_factor=1.0",
    "grouped_reducescatter_async": "tensors, name=None, op=Average, "
                                   "process_set=global_process_set, prescale_factor=1.0, "
                                   "postscale_factor=1.0",
    "join": "device=-1",
    "barrier": "process_set=global_process_set",
    "poll": "handle",
    "synchronize": "handle",
    "broadcast_parameters": "params, root_rank",
    "broadcast_optimizer_state": "optimizer, root_rank, model=None",
    "broadcast_object": "obj, root_rank=0, name=None, process_set=global_process_set",
    "allgather_object": "obj, name=None",
    "DistributedOptimizer": "optimizer, named_parameters=None, compression=Compression.none, "
                            "backward_passes_per_step=1, op=Average, "
                            "gradient_predivide_factor=1.0, num_groups=0, groups=None, "
                            "sparse_as_dense=False, process_set=global_process_set",
}


@pytest.mark.parametrize("name", sorted(HOROVOD_SIGNATURES))
def test_signature_is_horovods(name):
    import ringlet.torch as hvd
    defaults = {"Compression": hvd.Compression, "global_process_set": hvd.global_process_set,
                "Average": hvd.Average}
    ours = list(inspect.signature(getattr(hvd, name)).parameters.values())
    theirs = [p.strip() for p in HOROVOD_SIGNATURES[name].split(",")]
    assert [p.name for p in ours[:len(theirs)]] == [p.split("=")[0] for p in theirs]
    for param, spec in zip(ours, theirs):
        if "=" in spec:
            want = eval(spec.split("=", 1)[1], defaults)  # noqa: S307 (the table above)
            assert param.default is want or param.default == want, param.name
        else:
            assert param.default is inspect.Parameter.empty, param.name
    assert all(p.default is not inspect.Parameter.empty for p in ours[len(theirs):])


def test_horovods_public_names_are_here():
    import ringlet.torch as hvd
    names = set(HOROVOD_SIGNATURES) | {
        "Compression", "HorovodInternalError", "ProcessSet", "SyncBatchNorm", "Average",
        "Sum", "Adasum", "Min", "Max", "Product", "init", "shutdown", "is_initialized",
        "start_timeline", "stop_timeline", "size", "local_size", "cross_size", "rank",
        "local_rank", "cross_rank", "mpi_threads_supported", "mpi_enabled", "mpi_built",
        "gloo_enabled", "gloo_built", "nccl_built", "ddl_built", "ccl_built", "cuda_built",
        "rocm_built", "global_process_set", "add_process_set", "remove_process_set"}
    assert sorted(n for n in names if not hasattr(hvd, n)) == []
    assert [p for p in inspect.signature(hvd.SyncBatchNorm).parameters][:5] == [
        "num_features", "eps", "momentum", "affine", "track_running_stats"]
    from ringlet.torch import mpi_ops
    assert mpi_ops.size is hvd.size and mpi_ops.Sum == hvd.Sum  # as horovod.torch.mpi_ops


def test_poll_and_synchronize(rt):
    h = rt.allreduce_async(torch.ones(1000), name="p")
    rt.synchronize(h)
    assert rt.synchronize(h) is None  # synchronized already, as in Horovod
    h = rt.allreduce_async(torch.ones(10), name="q")
    while not rt.poll(h):
        pass
    assert torch.equal(rt.synchronize(h), torch.ones(10))


def test_join(rt):
    # The last rank runs one more allreduce than the others; those that
    # joined contribute zeros to it.
    last = rt.size() - 1
    if rt.rank() == last:
        out = rt.allreduce(torch.ones(3), op=rt.Sum, name="after_join")
        assert torch.equal(out, torch.ones(3))
    assert rt.join() == last


def test_barrier(rt):
    # Rank 0 arrives late: nobody may leave the barrier before it arrived.
    import time
    late = 0.3
    for _ in range(2):
        rt.barrier()
        start = time.monotonic()
        if rt.rank() == 0:
            time.sleep(late)
        rt.barrier()
        assert time.monotonic() - start >= late * 0.9


def test_process_sets(rt):
    if rt.size() < 2:
        pytest.skip("needs two ranks")
    evens = rt.add_process_set([r for r in range(rt.size()) if r % 2 == 0])
    try:
        assert evens.included() == (rt.rank() % 2 == 0)
        if evens.included():
            out = rt.allreduce(torch.ones(2) * rt.rank(), op=rt.Sum, process_set=evens)
            assert out.tolist() == [float(sum(evens.ranks))] * 2
            g = rt.allgather(torch.tensor([rt.rank()]), process_set=evens)
            assert g.tolist() == evens.ranks
            b = rt.broadcast(torch.tensor([rt.rank()]), evens.ranks[-1], process_set=evens)
            assert b.item() == evens.ranks[-1]
            rt.barrier(process_set=evens)
            assert evens.size() == len(evens.ranks) and evens.rank() == evens.ranks.index(
                rt.rank())
        with pytest.raises(ValueError):
            rt.add_process_set(evens)  # registered already
    finally:
        assert rt.remove_process_set(evens)
    assert not rt.remove_process_set(rt.global_process_set)


def test_static_process_sets():
    import ringlet.torch as hvd
    low = hvd.ProcessSet([0, 1])
    hvd.init(process_sets=[low])
    try:
        assert low.process_set_id == 1
        if low.included():
            assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=low).item() == 2.0
        hvd.barrier()  # a rank's shutdown ends what the others still run
    finally:
        hvd.shutdown()


def test_init_twice_and_again_after_shutdown():
    import ringlet.torch as hvd
    hvd.init()
    hvd.init()  # a no-op while initialized, as in Horovod
    hvd.shutdown()
    assert not hvd.is_initialized()
    hvd.init()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == hvd.size()
    hvd.shutdown()
