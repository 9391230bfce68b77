"""Keras 3 on PyTorch (``KERAS_BACKEND=torch``): the seam's functions
(ringlet.keras.keras3.backends) over ringlet.torch's collectives.

Keras's torch backend runs ``model.fit``'s step eagerly (``jit_compile=True``
there means ``torch.compile``, which Ringlet's calls would break into
pieces), so a collective runs where it is called and a condition is a Python
``if``. A Keras variable holds a torch tensor (``.value``); its gradient is a
dense tensor.
"""

import keras
import torch

from ringlet.common.process_sets import global_process_set
from ringlet.keras.keras3 import shared_gradients as _shared
from ringlet.torch import mpi_ops as _ops
from ringlet.torch.compression import Compression
from ringlet.torch.functions import allgather_object, broadcast_object  # noqa: F401
from ringlet.torch.mpi_ops import barrier, join  # noqa: F401


def _reduce_group(tensors, name, op, prescale, postscale, compression, process_set):
    with torch.no_grad():
        return _ops.grouped_allreduce([t.detach().contiguous() for t in tensors], name=name,
                                      compression=compression or Compression.none, op=op,
                                      prescale_factor=prescale, postscale_factor=postscale,
                                      process_set=process_set)


def GradientReducer(settings, name):
    """DistributedOptimizer's reduction: one grouped allreduce per call."""
    return _shared.GradientReducer(settings, name, _reduce_group, lambda t, n: t / n)


def _tensor(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, keras.Variable):
        return value.value.detach()
    return keras.ops.convert_to_tensor(value)


def allreduce(value, name, op, prescale_factor, postscale_factor, compression, process_set):
    return _ops.allreduce(_tensor(value).contiguous(), name=name, op=op,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                          compression=compression, process_set=process_set)


def allgather(value, name, process_set):
    return _ops.allgather(_tensor(value).contiguous(), name=name, process_set=process_set)


def broadcast(value, root_rank, name, process_set):
    return _ops.broadcast(_tensor(value).contiguous(), root_rank, name=name,
                          process_set=process_set)


def reducescatter(value, name, op, process_set):
    return _ops.reducescatter(_tensor(value).contiguous(), name=name, op=op,
                              process_set=process_set)


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """``root_rank``'s values assigned to the Keras ``variables``, all in flight at
    once, named by their place in the list (every rank passes the same list)."""
    handles = [_ops.broadcast_async(v.value.detach().contiguous(), root_rank,
                                    name=f"broadcast_variables.{i}", process_set=process_set)
               for i, v in enumerate(variables)]
    for variable, handle in zip(variables, handles):
        variable.assign(_ops.synchronize(handle))


def is_sparse(grad):
    return isinstance(grad, torch.Tensor) and grad.is_sparse


def densify(grad):
    return grad.to_dense()


def cond(pred, true_fn, false_fn, state=()):
    """``true_fn()`` where ``pred`` holds, else ``false_fn()``: eager, at once
    (``state``, the variables the branches assign, matters to traced backends only)."""
    del state
    return true_fn() if bool(pred) else false_fn()
