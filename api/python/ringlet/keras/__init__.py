"""``import ringlet.keras as hvd``: horovod.keras's API for the Keras 2 API
(tf-keras, what ``tf.keras`` is with ``TF_USE_LEGACY_KERAS=1``) on Ringlet.

Keras 3 is not served yet: importing this module selects tf-keras for
``tf.keras`` unless ``TF_USE_LEGACY_KERAS`` says otherwise.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

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
from ringlet.tensorflow import mpi_ops as _ops
from ringlet.tensorflow.compression import Compression  # noqa: F401
from ringlet.tensorflow.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_variables)
from ringlet.tensorflow.gradient_tape import GradientReduction as _GradientReduction
from ringlet.tensorflow.mpi_ops import barrier, join  # noqa: F401


class _DistributedOptimizer:
    """Mixed in before the wrapped optimizer's class: apply_gradients() applies
    the gradients reduced over the ranks.

    With backward_passes_per_step N > 1, as in Horovod, each call adds its
    gradients to local sums and only every N-th call reduces the sums (divided
    by N with average_aggregated_gradients) over the ranks and applies them;
    the calls between only count the optimizer's iterations, so that learning
    rate schedules keep their pace. Every rank calls in step, so all take the
    same branch, eager or in a ``tf.function``.
    """

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        pairs = list(grads_and_vars)
        grads, variables = [g for g, _ in pairs], [v for _, v in pairs]
        if self._ringlet_passes == 1:
            reduced = self._ringlet_reduction(grads, "DistributedOptimizer")
            return super().apply_gradients(list(zip(reduced, variables)), *args, **kwargs)
        return self._ringlet_aggregate(grads, variables, *args, **kwargs)

    def _ringlet_aggregate(self, grads, variables, *args, **kwargs):
        if self._ringlet_sums is None:
            with tf.init_scope():  # created once, outside any tf.function being traced
                self._ringlet_sums = [
                    None if g is None else tf.Variable(tf.zeros(v.shape, g.dtype),
                                                       trainable=False)
                    for g, v in zip(grads, variables)]
                self._ringlet_count = tf.Variable(0, dtype=tf.int64, trainable=False)
        for s, g in zip(self._ringlet_sums, grads):
            if s is not None:
                s.assign_add(tf.convert_to_tensor(g))
        count = self._ringlet_count.assign_add(1)

        def reduce_and_apply():
            passes = float(self._ringlet_passes) if self._ringlet_average_passes else 1.0
            local = [None if s is None else s / passes for s in self._ringlet_sums]
            reduced = self._ringlet_reduction(local, "DistributedOptimizer")
            # In a tf.function, stateful ops run in program order.
            super(_DistributedOptimizer, self).apply_gradients(
                [(r, v) for r, v in zip(reduced, variables) if r is not None], *args, **kwargs)
            for s in self._ringlet_sums:
                if s is not None:
                    s.assign(tf.zeros_like(s))
            self._ringlet_count.assign(0)
            return tf.constant(True)

        def count_only():
            self.iterations.assign_add(1)
            return tf.constant(False)

        return tf.cond(count >= self._ringlet_passes, reduce_and_apply, count_only)


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set):
    """A Keras optimizer of the same class and configuration whose apply_gradients()
    (and so minimize() and model.fit()) uses gradients reduced over the ranks."""
    reduction = _GradientReduction(compression, sparse_as_dense, op, gradient_predivide_factor,
                                   process_set)
    if int(backward_passes_per_step) < 1:
        raise ValueError(f"backward_passes_per_step must be at least 1, not "
                         f"{backward_passes_per_step}")
    base = optimizer.__class__
    cls = type(base.__name__, (_DistributedOptimizer, base), {})
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    distributed = cls.from_config(config)
    distributed._ringlet_reduction = reduction
    distributed._ringlet_passes = int(backward_passes_per_step)
    distributed._ringlet_average_passes = bool(average_aggregated_gradients)
    distributed._ringlet_sums = None
    return distributed


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none, process_set=global_process_set):
    """The reduction of a value (a tensor, array or number) over the ranks, as a numpy value."""
    return _ops.allreduce(tf.constant(value), average=average, name=name, op=op,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                          compression=compression, process_set=process_set).numpy()


def allgather(value, name=None, process_set=global_process_set):
    return _ops.allgather(tf.constant(value), name=name, process_set=process_set).numpy()


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    return _ops.broadcast(tf.constant(value), root_rank, name=name,
                          process_set=process_set).numpy()


def reducescatter(value, name=None, op=Average, process_set=global_process_set):
    return _ops.reducescatter(tf.constant(value), name=name, op=op,
                              process_set=process_set).numpy()


def load_model(filepath, custom_optimizers=None, custom_objects=None, compression=Compression.none):
    """Loads a Keras model saved with a wrapped optimizer, wrapping its optimizer again."""
    model = _keras.models.load_model(filepath, custom_objects=custom_objects)
    if model.optimizer is not None:
        model.optimizer = DistributedOptimizer(model.optimizer, compression=compression)
    return model
