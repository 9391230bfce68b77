"""``import ringlet.tensorflow as hvd``: horovod.tensorflow's API (TensorFlow 2,
eager and ``tf.function``) on Ringlet.

Importing it selects the Keras 2 API (tf-keras) for ``tf.keras`` unless
``TF_USE_LEGACY_KERAS`` says otherwise: Horovod's scripts are written for it,
and Ringlet does not serve Keras 3 yet.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

try:
    import tensorflow as _tf  # noqa: F401
except ImportError as e:
    raise ImportError("ringlet.tensorflow needs TensorFlow: pip install 'ringlet[tensorflow]' "
                      "(or pip install tensorflow tf-keras)") from e

from ringlet.common.api import *  # noqa: F401,F403  (Horovod's shared names)
from ringlet.tensorflow.compression import Compression  # noqa: F401
from ringlet.tensorflow.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_variables)
from ringlet.tensorflow.gradient_tape import DistributedGradientTape  # noqa: F401
from ringlet.common.basics import Average
from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.mpi_ops import (  # noqa: F401
    allgather, allreduce, alltoall, barrier,
    broadcast, grouped_allreduce, join, reducescatter)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set):
    """Wraps a Keras optimizer so that it applies gradients reduced over the ranks
    (ringlet.keras.DistributedOptimizer); TensorFlow 1 optimizers are not served."""
    from ringlet.keras import DistributedOptimizer as _keras_optimizer
    return _keras_optimizer(optimizer, name=name, device_dense=device_dense,
                            device_sparse=device_sparse, compression=compression,
                            sparse_as_dense=sparse_as_dense,
                            gradient_predivide_factor=gradient_predivide_factor, op=op,
                            backward_passes_per_step=backward_passes_per_step,
                            average_aggregated_gradients=average_aggregated_gradients,
                            num_groups=num_groups, groups=groups, process_set=process_set)
