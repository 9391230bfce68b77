"""``import ringlet.torch as hvd``: horovod.torch's API on Ringlet."""

try:
    import torch as _torch  # noqa: F401
except ImportError as e:
    raise ImportError("ringlet.torch needs PyTorch: pip install 'ringlet[torch]' (or "
                      "pip install torch)") from e

from ringlet.common.basics import (  # noqa: F401
    init, shutdown, is_initialized, size, rank, local_size, local_rank, cross_size,
    cross_rank, is_homogeneous, mpi_threads_supported, mpi_enabled, mpi_built,
    gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built, cuda_built, rocm_built,
    start_timeline, stop_timeline)
from ringlet.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from ringlet.common.process_sets import (  # noqa: F401
    ProcessSet, global_process_set, add_process_set, remove_process_set)
from ringlet.torch.compression import Compression  # noqa: F401
from ringlet.torch.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters)
from ringlet.torch.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum,
    allgather, allgather_async, allreduce, allreduce_, allreduce_async, allreduce_async_,
    alltoall, alltoall_async, barrier, broadcast, broadcast_, broadcast_async,
    broadcast_async_, grouped_allgather, grouped_allgather_async, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    grouped_reducescatter, grouped_reducescatter_async, join, poll, reducescatter,
    reducescatter_async, synchronize)
from ringlet.torch.optimizer import DistributedOptimizer  # noqa: F401
from ringlet.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
