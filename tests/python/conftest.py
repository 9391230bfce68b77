"""Shared by the Python suites, which every rank of a ringletrun job runs
in the same order: each test starts Ringlet and shuts it down, and values
every rank must agree on are compared across ranks."""

import pytest

try:
    import torch
except ImportError:  # the numpy suite runs without it
    torch = None


@pytest.fixture
def rt():
    """ringlet.torch, initialized for one test and shut down after it."""
    import ringlet.torch as hvd
    hvd.init()
    yield hvd
    # A rank's shutdown ends what the others still run: meet first.
    hvd.barrier()
    hvd.shutdown()


def input_of(rank, shape, dtype, salt=0):
    """The deterministic input of `rank`, so that every rank knows every rank's input."""
    n = 1
    for d in shape:
        n *= d
    values = (torch.arange(n, dtype=torch.float64) % 7) + rank + 1 + salt
    if dtype == torch.bool:
        return ((values.long() + rank) % 2 == 0).reshape(shape)
    return values.to(dtype).reshape(shape)


@pytest.fixture
def rn():
    """ringlet.numpy, initialized for one test and shut down after it."""
    import ringlet.numpy as hvd
    hvd.init()
    yield hvd
    hvd.barrier()
    hvd.shutdown()


@pytest.fixture
def rtf():
    """ringlet.tensorflow, initialized for one test and shut down after it."""
    import ringlet.tensorflow as hvd
    hvd.init()
    yield hvd
    hvd.barrier()
    hvd.shutdown()


@pytest.fixture
def rk():
    """ringlet.keras, initialized for one test and shut down after it."""
    import ringlet.keras as hvd
    hvd.init()
    yield hvd
    hvd.barrier()
    hvd.shutdown()


def same_on_every_rank(hvd, tensor, name):
    """True when every rank holds the same values in `tensor`."""
    flat = tensor.detach().reshape(1, -1).to(torch.float64)
    gathered = hvd.allgather(flat, name=name)
    return bool((gathered == gathered[0]).all())
