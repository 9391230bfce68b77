"""``import ringlet.tensorflow as hvd``: horovod.tensorflow's API on Ringlet,
eager, inside ``tf.function`` and in ``tf.compat.v1`` graphs and sessions.

Keras: where the program chose tf-keras (``TF_USE_LEGACY_KERAS=1``, or
``tf_keras`` imported first), importing this sets ``TF_USE_LEGACY_KERAS=1``
(unless set) so that ``tf.keras`` is tf-keras; otherwise ``tf.keras`` stays
Keras 3 (ringlet.common.keras_selection).
"""

from ringlet.common import keras_selection as _keras_selection

_keras_selection.choose()  # before TensorFlow reads TF_USE_LEGACY_KERAS

try:
    import tensorflow as tf
except ImportError as e:
    raise ImportError("ringlet.tensorflow needs TensorFlow: pip install 'ringlet[tensorflow]' "
                      "(or pip install tensorflow tf-keras)") from e

from ringlet.common.api import *  # noqa: F401,F403  (Horovod's shared names)
from ringlet.common.basics import Adasum, Average
from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow import util  # noqa: F401
from ringlet.tensorflow.compression import Compression  # noqa: F401
from ringlet.tensorflow.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_object_fn, broadcast_variables)
from ringlet.tensorflow.gradient_aggregation import LocalGradientAggregationHelper  # noqa: F401
from ringlet.tensorflow.gradient_tape import (  # noqa: F401
    DistributedGradientTape, PartialDistributedGradientTape, check_groups as _check_groups)
from ringlet.tensorflow.legacy import (  # noqa: F401
    BroadcastGlobalVariablesHook, _DistributedOptimizer, broadcast_global_variables)
from ringlet.tensorflow.mpi_ops import (  # noqa: F401
    _allreduce, _grouped_allreduce, _grouped_reducescatter, _reducescatter, allgather,
    allreduce, alltoall, barrier, broadcast, broadcast_, check_num_rank_power_of_2,
    cross_rank_op, cross_size_op, grouped_allgather, grouped_allreduce, grouped_reducescatter,
    handle_average_backwards_compatibility, join, local_rank_op, local_size_op,
    process_set_included_op, rank_op, reducescatter, size_op)
from ringlet.tensorflow.sync_batch_norm import SyncBatchNormalization  # noqa: F401
from ringlet.tensorflow.util import (  # noqa: F401
    _cache, _executing_eagerly, _make_subgraph, refs_to_vars, vars_to_refs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """An optimizer that applies gradients reduced over the ranks of the set.

    A ``tf.compat.v1.train.Optimizer`` is wrapped here (compute_gradients() reduces,
    apply_gradients() is the wrapped one's; graphs only for
    ``backward_passes_per_step`` > 1); a Keras optimizer becomes
    ringlet.keras.DistributedOptimizer's.
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Adasum and average_aggregated_gradients:
        raise ValueError("Adasum does not support average_aggregated_gradients == True")
    groups = _check_groups(num_groups, groups)
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        return _DistributedOptimizer(
            optimizer, name=name, use_locking=use_locking, device_dense=device_dense,
            device_sparse=device_sparse, compression=compression,
            sparse_as_dense=sparse_as_dense, op=op,
            gradient_predivide_factor=gradient_predivide_factor,
            backward_passes_per_step=backward_passes_per_step,
            average_aggregated_gradients=average_aggregated_gradients, groups=groups,
            process_set=process_set, scale_local_gradients=scale_local_gradients)
    from ringlet.keras import DistributedOptimizer as keras_optimizer
    return keras_optimizer(optimizer, name=name, device_dense=device_dense,
                           device_sparse=device_sparse, compression=compression,
                           sparse_as_dense=sparse_as_dense,
                           gradient_predivide_factor=gradient_predivide_factor, op=op,
                           backward_passes_per_step=backward_passes_per_step,
                           average_aggregated_gradients=average_aggregated_gradients,
                           groups=groups, process_set=process_set,
                           scale_local_gradients=scale_local_gradients)
from ringlet.tensorflow import elastic  # noqa: F401,E402  (hvd.elastic)
