"""Each cause of failure raises the class Horovod 0.28.1 raises for it, so
that ``except`` clauses written for Horovod catch Ringlet's errors:

- a collective that failed across ranks: ``HorovodInternalError``, a
  ``RuntimeError`` (horovod/torch/mpi_ops.py ``synchronize`` wraps the core's
  failures so);
- a wrong call on this rank: ``ValueError`` (the core's InvalidArgument
  status, which pybind turns into ValueError before ``synchronize`` could
  wrap it);
- a call before ``init()``: ``ValueError`` from the queries
  (horovod/common/basics.py) and ``HorovodInternalError`` from the
  collectives (a PreconditionError status, a RuntimeError, wrapped);
- ``init()`` that fails: ``ValueError`` (basics.py ``init``).

Each test leaves the job able to run the next collective."""

import numpy as np
import pytest

import ringlet.numpy as hvd_numpy
from ringlet.common import exceptions

FRAMEWORKS = ["numpy", "torch"]


def framework(name):
    if name == "torch":
        pytest.importorskip("torch", reason="torch is not installed")
        import ringlet.torch as hvd
    else:
        hvd = hvd_numpy
    return hvd


def tensor(name, values):
    if name == "torch":
        import torch
        return torch.tensor(values, dtype=torch.float32)
    return np.array(values, dtype=np.float32)


def still_works(hvd, name):
    got = hvd.allreduce(tensor(name, [1.0, 2.0]), op=hvd.Sum, name="still")
    assert [float(v) for v in got] == [hvd.size() * 1.0, hvd.size() * 2.0]


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_calls_before_init_catch_as_value_error_and_as_horovod_internal_error(name):
    hvd = framework(name)
    assert not hvd.is_initialized()
    with pytest.raises(ValueError) as queried:
        hvd.rank()
    assert isinstance(queried.value, exceptions.NotInitializedError)
    with pytest.raises(exceptions.HorovodInternalError) as reduced:
        hvd.allreduce(tensor(name, [1.0]), name="early")
    assert isinstance(reduced.value, RuntimeError) and isinstance(reduced.value, ValueError)
    assert "before init()" in str(reduced.value) and reduced.value.code == 2


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_ranks_that_disagree_raise_horovod_internal_error(name):
    hvd = framework(name)
    hvd.init()
    try:
        with pytest.raises(RuntimeError) as failed:
            hvd.allreduce(tensor(name, [1.0] * (2 + hvd.rank())), name="shapes")
        assert isinstance(failed.value, exceptions.HorovodInternalError)
        assert isinstance(failed.value, exceptions.MismatchError)
        assert not isinstance(failed.value, ValueError)
        assert "shapes" in str(failed.value) and failed.value.code == 7
        still_works(hvd, name)
    finally:
        hvd.barrier()
        hvd.shutdown()


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_a_wrong_call_raises_value_error(name):
    hvd = framework(name)
    hvd.init()
    try:
        # Horovod refuses an out-of-range root at submission (InvalidArgument).
        with pytest.raises(ValueError) as refused:
            hvd.broadcast(tensor(name, [1.0]), root_rank=hvd.size(), name="root")
        assert isinstance(refused.value, exceptions.InvalidArgumentError)
        assert not isinstance(refused.value, RuntimeError)
        assert refused.value.code == 1 and "root" in str(refused.value)
        still_works(hvd, name)
    finally:
        hvd.barrier()
        hvd.shutdown()


def test_a_bad_setting_fails_init_with_a_value_error(monkeypatch):
    monkeypatch.setenv("HOROVOD_FUSION_THRESHOLD", "lots")
    with pytest.raises(ValueError) as failed:
        hvd_numpy.init()
    assert isinstance(failed.value, exceptions.ConfigError)
    assert "HOROVOD_FUSION_THRESHOLD" in str(failed.value) and failed.value.code == 3
    assert not hvd_numpy.is_initialized()
    monkeypatch.delenv("HOROVOD_FUSION_THRESHOLD")
    hvd_numpy.init()
    still_works(hvd_numpy, "numpy")
    hvd_numpy.barrier()
    hvd_numpy.shutdown()


def test_every_code_has_one_class():
    for code in range(1, 9):
        cls = exceptions.exception_for_code(code)
        assert cls.code == code
        assert issubclass(cls, (ValueError, exceptions.HorovodInternalError))
    for failure_across_ranks in (4, 5, 6, 8):
        assert issubclass(exceptions.exception_for_code(failure_across_ranks),
                          exceptions.HorovodInternalError)
        assert exceptions.exception_for_code(failure_across_ranks, during_init=True) is \
            exceptions.InitError
