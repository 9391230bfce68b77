"""Keras 3 on JAX (``KERAS_BACKEND=jax``): the seam's functions
(ringlet.keras.keras3.backends) over ringlet.jax's collectives.

Keras compiles ``model.fit``'s step with ``jax.jit`` by default and runs it
statelessly: the optimizer's ``apply`` is traced inside a StatelessScope that
maps each variable to its current value, and assignments only record new
values. ringlet.jax's collectives run inside the compiled step as callbacks
that read and write XLA's buffers (ringlet/jax/compiled_callback.py), and
outside it at once. A condition on traced values is ``lax.cond``, so that a
collective in one branch runs only when that branch is taken; its branches
assign variables, so each runs in a StatelessScope of its own over the
values of the variables it may touch (``state``), and the values it leaves
become the outer assignments.
"""

import jax
import jax.numpy as jnp
import keras

from ringlet.common.process_sets import global_process_set
from ringlet.jax import mpi_ops as _ops
from ringlet.jax.compression import Compression
from ringlet.jax.mpi_ops import allgather_object, barrier, broadcast_object, join  # noqa: F401
from ringlet.keras.keras3 import shared_gradients as _shared


def _reduce_group(tensors, name, op, prescale, postscale, compression, process_set):
    compression = compression or Compression.none
    pairs = [compression.compress(t) for t in tensors]
    reduced = _ops.grouped_allreduce([c for c, _ in pairs], name=name, op=op,
                                     prescale_factor=prescale, postscale_factor=postscale,
                                     process_set=process_set)
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, pairs)]


def GradientReducer(settings, name):
    """DistributedOptimizer's reduction: one grouped allreduce per call (per run of
    the compiled step)."""
    return _shared.GradientReducer(settings, name, _reduce_group, lambda t, n: t / n)


def _array(value):
    if isinstance(value, keras.Variable):
        return value.value
    return keras.ops.convert_to_tensor(value)


def allreduce(value, name, op, prescale_factor, postscale_factor, compression, process_set):
    compressed, ctx = compression.compress(_array(value))
    reduced = _ops.allreduce(compressed, name=name, op=op, prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor, process_set=process_set)
    return compression.decompress(reduced, ctx)


def allgather(value, name, process_set):
    return _ops.allgather(_array(value), name=name, process_set=process_set)


def broadcast(value, root_rank, name, process_set):
    return _ops.broadcast(_array(value), root_rank, name=name, process_set=process_set)


def reducescatter(value, name, op, process_set):
    return _ops.reducescatter(_array(value), name=name, op=op, process_set=process_set)


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """``root_rank``'s values assigned to the Keras ``variables``, broadcast as one
    list (every rank passes the same list)."""
    values = _ops.broadcast_parameters([v.value for v in variables], root_rank,
                                       name="broadcast_variables", process_set=process_set)
    for variable, value in zip(variables, values):
        variable.assign(value)


def is_sparse(grad):
    """JAX's gradients are dense arrays."""
    del grad
    return False


def densify(grad):
    return grad


def cond(pred, true_fn, false_fn, state=()):
    """``true_fn()`` where ``pred`` holds, else ``false_fn()``; neither returns a
    value. Eager: at once. Traced: ``lax.cond``, each branch's assignments to the
    variables of ``state`` carried out of it (see the module's docstring)."""
    if not isinstance(pred, jax.core.Tracer):
        if bool(pred):
            true_fn()
        else:
            false_fn()
        return
    state = list(state)

    def branch(fn):
        def run(values):
            with keras.StatelessScope(state_mapping=list(zip(state, values))) as scope:
                fn()
            return [scope.get_current_value(v) for v in state]
        return run

    values = [jnp.asarray(v.value) for v in state]
    for variable, value in zip(state, jax.lax.cond(pred, branch(true_fn), branch(false_fn),
                                                   values)):
        variable.assign(value)
