"""``import ringlet.torch as hvd``: horovod.torch's API on Ringlet."""

try:
    import torch as _torch  # noqa: F401
except ImportError as e:
    raise ImportError("ringlet.torch needs PyTorch: pip install 'ringlet[torch]' (or "
                      "pip install torch)") from e

from ringlet.common.api import *  # noqa: F401,F403  (Horovod's shared names)
from ringlet.torch.compression import Compression  # noqa: F401
from ringlet.torch.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters)
from ringlet.torch.mpi_ops import (  # noqa: F401
    allgather, allgather_async, allreduce, allreduce_, allreduce_async, allreduce_async_,
    alltoall, alltoall_async, barrier, broadcast, broadcast_, broadcast_async,
    broadcast_async_, grouped_allgather, grouped_allgather_async, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    grouped_reducescatter, grouped_reducescatter_async, join, poll, reducescatter,
    reducescatter_async, sparse_allreduce_async, synchronize)
from ringlet.torch.optimizer import DistributedOptimizer  # noqa: F401
from ringlet.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from ringlet.torch import elastic  # noqa: F401,E402  (hvd.elastic)
from ringlet.torch import distributed as _distributed  # noqa: F401,E402  (registers "ringlet")
