"""Data parallelism for optax: gradients averaged over the ranks before the
optimizer sees them.

``allreduce_gradients()`` is an ``optax.GradientTransformation`` that reduces
the updates it is given (a pytree of gradients) as one fused group of
tensors named by their paths; put it first in ``optax.chain``.
``DistributedOptimizer(tx)`` is ``optax.chain(allreduce_gradients(...), tx)``.
Both work in a jit-compiled train step (the reduction is an ordered
io_callback, mpi_ops.py) and outside one. They hold no state of their own.
"""

import optax

from ringlet.common.basics import Average, Sum
from ringlet.common.process_sets import global_process_set
from ringlet.jax import mpi_ops as _mpi_ops


def allreduce_gradients(op=Average, gradient_predivide_factor=1.0, name="gradients",
                        process_set=global_process_set):
    """An optax transformation averaging (``op=Average``) or summing (``op=Sum``) the
    updates over the members of ``process_set``.

    ``gradient_predivide_factor``, as in Horovod's optimizers: each rank's
    gradients are divided by it before the sum and the sum multiplied by
    ``factor / size`` after (an Average overall, with less risk of overflow in
    low precision); only with ``op=Average``. The tensors are named
    ``grouped.<name>.<path>``: give two transformations in one program different
    names."""
    if op not in (Average, Sum):
        raise ValueError("allreduce_gradients: op must be Average or Sum")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if gradient_predivide_factor != 1.0:
        reduce_op, prescale, postscale = Average, 1.0 / gradient_predivide_factor, \
            gradient_predivide_factor
    else:
        reduce_op, prescale, postscale = op, 1.0, 1.0

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params
        reduced = _mpi_ops.grouped_allreduce(updates, name=name, op=reduce_op,
                                             prescale_factor=prescale,
                                             postscale_factor=postscale,
                                             process_set=process_set)
        return reduced, state

    return optax.GradientTransformation(init_fn, update_fn)


def DistributedOptimizer(optimizer, op=Average, gradient_predivide_factor=1.0,
                         name="gradients", process_set=global_process_set):
    """``optimizer`` (an optax.GradientTransformation) applied to the gradients
    averaged over the ranks: ``optax.chain(allreduce_gradients(...), optimizer)``."""
    return optax.chain(
        allreduce_gradients(op=op, gradient_predivide_factor=gradient_predivide_factor,
                            name=name, process_set=process_set),
        optimizer)
