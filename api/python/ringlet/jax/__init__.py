"""``import ringlet.jax as hvd``: Horovod's API for JAX, over Ringlet.

The basics (``init``, ``rank``, ``size``, ...) and process sets are every
module's; the collectives take and return ``jax.Array`` (host memory), outside
``jax.jit`` and inside it; ``broadcast_parameters`` takes a pytree; the optax
transformations ``allreduce_gradients()`` and ``DistributedOptimizer(tx)``
average gradients. See docs/jax.md.
"""

try:
    import jax as _jax  # noqa: F401
except ImportError as e:
    raise ImportError("ringlet.jax needs JAX: pip install 'ringlet[jax]' (or "
                      "pip install 'jax[cpu]' optax)") from e

from ringlet.common.api import *  # noqa: F401,F403  (Horovod's shared names)
from ringlet.jax.compression import Compression  # noqa: F401
from ringlet.jax.mpi_ops import (  # noqa: F401
    allgather, allgather_object, allreduce, alltoall, barrier, broadcast, broadcast_object,
    broadcast_parameters, grouped_allreduce, join, reducescatter)


def __getattr__(name):
    # optax is only needed by what uses it.
    if name in ("DistributedOptimizer", "allreduce_gradients"):
        from ringlet.jax import optimizer
        return getattr(optimizer, name)
    raise AttributeError(f"module 'ringlet.jax' has no attribute {name!r}")
