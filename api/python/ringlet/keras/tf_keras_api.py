"""ringlet.keras where the program chose tf-keras (the Keras 2 API, what
``tf.keras`` is with ``TF_USE_LEGACY_KERAS=1``): the API of horovod.keras and
horovod.tensorflow.keras together, on Ringlet. ringlet.keras takes its names
from here.
"""

import warnings

try:
    import tf_keras as _keras
except ImportError as e:
    raise ImportError("ringlet.keras needs tf-keras (the Keras 2 API): pip install "
                      "'ringlet[keras]' (or pip install tensorflow tf-keras)") from e

import tensorflow as tf

from ringlet.common.api import *  # noqa: F401,F403  (Horovod's shared names)
from ringlet.common.basics import Average
from ringlet.common.process_sets import global_process_set
from ringlet.keras import callbacks  # noqa: F401
from ringlet.keras import elastic  # noqa: F401
from ringlet.keras import optimizer as _optimizer
from ringlet.keras.callbacks import run_in_session as _run_in_session
from ringlet.tensorflow import legacy as _legacy
from ringlet.tensorflow import mpi_ops as _ops
from ringlet.tensorflow.compression import Compression
from ringlet.tensorflow.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_variables)
from ringlet.tensorflow.mpi_ops import barrier, join  # noqa: F401
from ringlet.common.api import __all__ as _shared_names

__all__ = _shared_names + [
    "Compression", "DistributedOptimizer", "PartialDistributedOptimizer", "allgather",
    "allgather_object", "allreduce", "barrier", "broadcast", "broadcast_global_variables",
    "broadcast_object", "broadcast_variables", "callbacks", "elastic", "join", "load_model",
    "reducescatter"]


def _groups_of(num_groups, groups):
    if num_groups != 0:
        warnings.warn("DistributedOptimizer: num_groups is deprecated, use groups",
                      DeprecationWarning, stacklevel=3)
        if groups is None:
            groups = num_groups
    return groups


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A Keras optimizer of ``optimizer``'s class and configuration whose
    ``compute_gradients`` (and so ``minimize`` and ``model.fit``) returns the
    gradients averaged (``op=Sum``: summed) over the ranks of ``process_set``.

    With ``backward_passes_per_step`` N > 1, each pass adds its gradients to
    local sums; every N-th pass reduces the sums (divided by N with
    ``average_aggregated_gradients``) and applies them, the others only count
    the optimizer's iterations. ``register_local_var(var)`` keeps a variable's
    gradient local (divided by the ranks' number with
    ``scale_local_gradients``). Every dense gradient goes in one grouped
    collective whatever ``groups``; its ops go on ``device_dense``
    (``device_sparse`` for IndexedSlices) where one is named.
    """
    groups = _groups_of(num_groups, groups)
    _optimizer.check(op, groups, backward_passes_per_step)
    return _optimizer.wrap(optimizer, _optimizer.Settings(
        name=name, compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op,
        backward_passes_per_step=int(backward_passes_per_step),
        average_aggregated_gradients=average_aggregated_gradients, groups=groups,
        process_set=process_set, scale_local_gradients=scale_local_gradients,
        device_dense=device_dense, device_sparse=device_sparse))


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average, groups=None,
                                process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """DistributedOptimizer whose ``local_layers`` (a Layer or a list of them, built)
    keep their trainable weights' gradients on this rank."""
    _optimizer.check(op, groups)
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, _keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, _keras.layers.Layer) for layer in local_layers):
        raise ValueError("PartialDistributedOptimizer: local_layers must be Keras layers "
                         "(tf.keras.layers.Layer)")
    opt = _optimizer.wrap(optimizer, _optimizer.Settings(
        name=name, compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op, groups=groups,
        process_set=process_set, scale_local_gradients=scale_local_gradients,
        device_dense=device_dense, device_sparse=device_sparse))
    for layer in local_layers:
        for var in layer.trainable_weights:
            opt.register_local_var(var)
    return opt


def broadcast_global_variables(root_rank):
    """Every global variable of the ``tf.compat.v1`` graph takes ``root_rank``'s value,
    in Keras's session; refused when eager (RuntimeError), as in Horovod: broadcast the
    model's and the optimizer's variables instead."""
    return _run_in_session(_legacy.broadcast_global_variables(root_rank))


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none, process_set=global_process_set):
    """The reduction (Average by default) of a tensor-compatible value over the ranks:
    a tensor when eager, its value (run in Keras's session) in a graph, as in Horovod."""
    return _run_in_session(_ops.allreduce(
        tf.constant(value), average=average, name=name, op=op,
        prescale_factor=prescale_factor, postscale_factor=postscale_factor,
        compression=compression, process_set=process_set))


def allgather(value, name=None, process_set=global_process_set):
    """Every rank's value (a tensor-compatible value) concatenated on dimension 0 (a
    tensor when eager, its value in a graph)."""
    return _run_in_session(_ops.allgather(tf.constant(value), name=name,
                                          process_set=process_set))


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s value (a tensor-compatible value) on every rank (a tensor when
    eager, its value in a graph)."""
    return _run_in_session(_ops.broadcast(tf.constant(value), root_rank, name=name,
                                          process_set=process_set))


def reducescatter(value, name=None, op=Average, process_set=global_process_set):
    """This rank's share of dimension 0 of the reduction of a tensor-compatible value (a
    tensor when eager, its value in a graph)."""
    return _run_in_session(_ops.reducescatter(tf.constant(value), name=name, op=op,
                                              process_set=process_set))


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False):
    """Loads a Keras model (any format Keras loads) whose optimizer comes back as a
    DistributedOptimizer with ``compression``, its saved state (slots, iterations)
    kept.

    Every optimizer of ``tf.keras.optimizers`` and ``tf.keras.optimizers.legacy``
    loads without naming it; ``custom_optimizers`` names classes of one's own
    (``custom_objects`` goes to Keras as well). ``legacy_opts`` is accepted for
    Horovod's signature: the optimizer keeps the family it was saved with.
    """
    objects = {cls.__name__: cls for cls in custom_optimizers or []}
    objects.update(custom_objects or {})
    model = _keras.models.load_model(filepath, custom_objects=objects)
    if isinstance(model.optimizer, (_keras.optimizers.Optimizer,
                                    _keras.optimizers.legacy.Optimizer)):
        _optimizer.distribute_in_place(model.optimizer,
                                       _optimizer.Settings(compression=compression))
    return model
