"""ringlet.keras for Keras 3 (what ``import keras`` is with TensorFlow 2.16 and
later): Horovod's Keras API over the backend Keras runs on, through one seam
(``backends``); served: TensorFlow, PyTorch and JAX.

Not served on Keras 3: ``hvd.elastic`` (tf-keras only); on TensorFlow,
XLA-compiled steps around Ringlet's collectives (``jit_compile=True``; refused
while traced, naming the fix). On JAX the compiled step (Keras's default
there) is served.
"""

from ringlet.common.api import *  # noqa: F401,F403  (Horovod's shared names)
from ringlet.common.api import __all__ as _shared_names
from ringlet.keras.keras3 import callbacks  # noqa: F401
from ringlet.keras.keras3.api import (  # noqa: F401
    Compression, DistributedOptimizer, PartialDistributedOptimizer, allgather,
    allgather_object, allreduce, barrier, broadcast, broadcast_global_variables,
    broadcast_object, broadcast_variables, join, load_model, reducescatter)

__all__ = _shared_names + [
    "Compression", "DistributedOptimizer", "PartialDistributedOptimizer", "allgather",
    "allgather_object", "allreduce", "barrier", "broadcast", "broadcast_global_variables",
    "broadcast_object", "broadcast_variables", "callbacks", "join", "load_model",
    "reducescatter"]
