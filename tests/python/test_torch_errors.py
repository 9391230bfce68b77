"""Every error is a Python exception on every rank, and the job goes on
after it: nothing hangs."""

import pytest
import torch

from ringlet.common import exceptions


def still_works(rt):
    assert rt.allreduce(torch.ones(2), op=rt.Sum).tolist() == [float(rt.size())] * 2


def test_mismatched_shapes_raise_on_every_rank(rt):
    with pytest.raises(exceptions.MismatchError) as err:
        rt.allreduce(torch.ones(2 + rt.rank()), name="shapes")
    assert isinstance(err.value, rt.HorovodInternalError)
    assert isinstance(err.value, RuntimeError)
    assert "shapes" in str(err.value) and err.value.code == 7
    still_works(rt)


def test_mismatched_dtypes_raise_on_every_rank(rt):
    dtype = torch.float32 if rt.rank() == 0 else torch.float64
    with pytest.raises(rt.HorovodInternalError, match="dtypes"):
        rt.allreduce(torch.ones(3, dtype=dtype), name="dtypes")
    still_works(rt)


def test_mismatched_ops_and_roots_raise(rt):
    with pytest.raises(rt.HorovodInternalError):
        rt.allreduce(torch.ones(3), op=rt.Sum if rt.rank() == 0 else rt.Max, name="ops")
    with pytest.raises(rt.HorovodInternalError):
        rt.broadcast(torch.ones(3), rt.rank(), name="roots")
    still_works(rt)


def test_allgather_with_other_trailing_dims_raises(rt):
    with pytest.raises(rt.HorovodInternalError):
        rt.allgather(torch.ones(2, 2 + rt.rank()), name="trailing")
    still_works(rt)


def test_duplicate_name_in_flight_is_a_value_error(rt):
    # Rank 0's first "twice" cannot complete before the others submit theirs,
    # which they do only after the barrier.
    if rt.rank() == 0:
        h = rt.allreduce_async(torch.ones(4), name="twice")
        with pytest.raises(ValueError, match="already in flight"):
            rt.allreduce_async(torch.ones(4), name="twice")
    rt.barrier()
    if rt.rank() != 0:
        h = rt.allreduce_async(torch.ones(4), name="twice")
    assert torch.equal(rt.synchronize(h), torch.ones(4))
    still_works(rt)


def test_a_failed_member_fails_its_group_after_all_are_done(rt):
    # One handle for the group: its error comes once every member ended, on
    # every rank, and the job goes on.
    good = torch.ones(2, 2)
    bad = torch.ones(1, 2 + rt.rank())  # trailing dimensions differ between ranks
    handle = rt.grouped_allgather_async([good, bad], name="group_with_bad")
    with pytest.raises(rt.HorovodInternalError, match="group_with_bad"):
        rt.synchronize(handle)
    assert rt.synchronize(handle) is None
    still_works(rt)


def test_a_group_refused_on_one_member_starts_none(rt):
    # Rank 0's groups are refused on their second member (a scalar, a bool
    # reduction); their first members must not be left in flight under their
    # names, which every rank then uses.
    x = torch.full((rt.size(), 2), float(rt.rank()))
    if rt.rank() == 0:
        with pytest.raises(ValueError, match="scalar"):
            rt.grouped_allgather_async([x, torch.tensor(1.0)], name="refused_ag")
        with pytest.raises(ValueError, match="bool"):
            rt.grouped_reducescatter_async([x, torch.ones(rt.size(), dtype=torch.bool)],
                                           op=rt.Sum, name="refused_rs")
    results = []
    for collective in (lambda: rt.allgather(x, name="grouped.refused_ag.0"),
                       lambda: rt.reducescatter(x, op=rt.Sum, name="grouped.refused_rs.0")):
        try:
            results.append(collective())
        except ValueError as e:  # "already in flight": asserted once every rank is through
            results.append(e)
    still_works(rt)
    gathered, share = results
    assert isinstance(gathered, torch.Tensor) and isinstance(share, torch.Tensor), results
    assert gathered[:, 0].tolist() == [float(r) for r in range(rt.size()) for _ in x], gathered
    assert share.tolist() == [[float(sum(range(rt.size())))] * 2], share


def test_a_group_the_bindings_would_refuse_starts_none(rt):
    # Rank 0's groups have a second member that is not contiguous, or on
    # another device than the first (meta): refused before the first member
    # is submitted, whose name every rank then uses.
    x = torch.full((rt.size(), 2), float(rt.rank()))
    if rt.rank() == 0:
        strided = torch.ones(2, rt.size()).t()
        with pytest.raises(ValueError, match="'allgather.grouped.strided_ag.1' is not contiguous"):
            rt.grouped_allgather_async([x, strided], name="strided_ag")
        with pytest.raises(ValueError,
                           match="'reducescatter.grouped.strided_rs.1' is not contiguous"):
            rt.grouped_reducescatter_async([x, strided], op=rt.Sum, name="strided_rs")
        with pytest.raises(ValueError, match="share one device"):
            rt.grouped_allgather_async([x, torch.ones(2, 2, device="meta")], name="mixed_ag")
        with pytest.raises(ValueError, match="share one device"):
            rt.grouped_reducescatter_async([x, torch.ones(2, 2, device="meta")],
                                           name="mixed_rs")
    results = []
    for collective in (lambda: rt.allgather(x, name="grouped.strided_ag.0"),
                       lambda: rt.reducescatter(x, op=rt.Sum, name="grouped.strided_rs.0"),
                       lambda: rt.allgather(x, name="grouped.mixed_ag.0"),
                       lambda: rt.reducescatter(x, op=rt.Sum, name="grouped.mixed_rs.0")):
        try:
            results.append(collective())
        except ValueError as e:  # "already in flight": asserted once every rank is through
            results.append(e)
    still_works(rt)
    assert all(isinstance(r, torch.Tensor) for r in results), results
    for gathered in results[0::2]:
        assert gathered[:, 0].tolist() == [float(r) for r in range(rt.size()) for _ in x]
    for share in results[1::2]:
        assert share.tolist() == [[float(sum(range(rt.size())))] * 2], share


def test_a_tensor_on_a_device_ringlet_does_not_serve_says_so(rt):
    meta = torch.ones(rt.size(), 2, device="meta")
    with pytest.raises(ValueError, match="lives in meta memory"):
        rt.grouped_allgather_async([meta, meta], name="on_meta")
    still_works(rt)


def test_a_sparse_allreduce_whose_values_fail_waits_for_its_indices(rt):
    # The values' dtype differs between the ranks, the indices' does not: the
    # values' allgather fails, and the indices' is still waited for and
    # released rather than left pending with its buffer.
    from ringlet.common import handles
    dtype = torch.float32 if rt.rank() == 0 else torch.float64
    sparse = torch.tensor([1.0, 0.0, 1.0], dtype=dtype).to_sparse()
    wait = rt.sparse_allreduce_async(sparse, name="mixed", op=rt.Sum)
    with pytest.raises(rt.HorovodInternalError, match="mixed.values"):
        wait()
    assert not handles._in_flight, handles._in_flight
    still_works(rt)


def test_alltoall_splits_must_be_int32_as_in_horovod(rt):
    for splits in (torch.ones(rt.size(), dtype=torch.float32),
                   torch.ones(rt.size(), dtype=torch.int64),
                   torch.ones(1, rt.size(), dtype=torch.int32)):
        with pytest.raises(ValueError, match="splits must be a 1-D int32 tensor"):
            rt.alltoall(torch.ones(rt.size()), splits)
    still_works(rt)


def test_unsupported_dtype_says_so(rt):
    with pytest.raises(ValueError, match="bool.*not supported"):
        rt.allreduce(torch.ones(3, dtype=torch.bool), name="bools")
    with pytest.raises(ValueError, match="complex64.*not supported"):
        rt.allreduce(torch.ones(3, dtype=torch.complex64), name="complex")
    still_works(rt)


def test_non_contiguous_tensor_says_so(rt):
    with pytest.raises(ValueError, match="not contiguous"):
        rt.allreduce_(torch.ones(4, 4).t(), name="transposed")
    still_works(rt)


def test_adasum_is_not_implemented(rt):
    with pytest.raises(NotImplementedError, match="Adasum"):
        rt.allreduce(torch.ones(2), op=rt.Adasum)
    with pytest.raises(NotImplementedError, match="Adasum"):
        rt.DistributedOptimizer(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1),
                                op=rt.Adasum)


def test_bad_root_is_an_error(rt):
    with pytest.raises((ValueError, RuntimeError)):
        rt.broadcast(torch.ones(2), rt.size() + 3, name="bad_root")
    still_works(rt)


def test_calls_before_init_are_value_errors():
    import ringlet.torch as hvd
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="init"):
        hvd.rank()
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(1))
