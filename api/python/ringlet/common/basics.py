"""What every framework module shares: init and shutdown, the job's shape,
what this build contains, the timeline, and the reduction operations."""

import atexit
import functools
import os
import sys

from ringlet import _ringlet
from ringlet.common import process_sets as _process_sets
from ringlet.runner import elastic_worker as _elastic_worker

# Horovod's values for its reduction operations, so that scripts comparing or
# storing them keep working.
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_CORE_OP = {
    Average: _ringlet.OP_AVG,
    Sum: _ringlet.OP_SUM,
    Min: _ringlet.OP_MIN,
    Max: _ringlet.OP_MAX,
    Product: _ringlet.OP_PROD,
}
_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
             Product: "Product"}


def core_op(op):
    """The core's value for one of the operations above."""
    if op == Adasum:
        raise NotImplementedError(
            "op=Adasum is not implemented by Ringlet yet; use Average or Sum")
    try:
        return _CORE_OP[op]
    except (KeyError, TypeError):
        raise ValueError(f"unknown reduction op {op!r}; use one of Average, Sum, Min, Max, "
                         f"Product") from None


def op_name(op):
    return _OP_NAMES.get(op, repr(op))


def resolve_op(op, average, default=Average):
    """Horovod's deprecated ``average=`` argument folded into ``op``."""
    if average is not None:
        if op is not None:
            raise ValueError("the op and average arguments are mutually exclusive")
        import warnings
        warnings.warn("the average argument is deprecated: use op=Average or op=Sum",
                      DeprecationWarning, stacklevel=3)
        return Average if average else Sum
    return default if op is None else op


_init_callbacks = []


def call_at_init(callback):
    """Has init() call ``callback()`` each time it starts Ringlet (framework state resets)."""
    _init_callbacks.append(callback)


def init(comm=None, process_sets=None):
    """Meets the other ranks (launched by ringletrun or mpirun) and starts Ringlet.

    ``comm`` is accepted for Horovod's signature: None, a list of every rank,
    or an MPI communicator spanning the whole job (subsets are process sets).
    ``process_sets`` is a list of ProcessSet objects created with the job (or
    "dynamic": sets can always be added at run time). Calling init() again
    while initialized does nothing, as in Horovod.
    """
    if _ringlet.is_initialized():
        return
    static_sets = []
    if process_sets is not None and process_sets != "dynamic":
        static_sets = list(process_sets)
        for ps in static_sets:
            if not isinstance(ps, _process_sets.ProcessSet):
                raise ValueError(f"process_sets must hold ProcessSet objects, not {ps!r}")
    ranks = [_process_sets.ranks_of(ps) for ps in static_sets]
    if _elastic_worker.active():
        # An elastic job's worker takes its place in the driver's next round.
        _elastic_worker.join_next_round()
    _ringlet.init(ranks if static_sets else None)
    _check_comm(comm)
    _process_sets.on_init(static_sets)
    for callback in _init_callbacks:
        callback()


def _check_comm(comm):
    if comm is None:
        return
    world = list(range(_ringlet.size()))
    if isinstance(comm, (list, tuple)):
        if sorted(comm) != world:
            raise ValueError("init(comm=[...]) must list every rank; run collectives among "
                             "some ranks with process sets (ringlet.torch.add_process_set)")
        return
    get_size = getattr(comm, "Get_size", None)
    if get_size is None or get_size() != len(world):
        raise ValueError("init(comm=...) must be None, a list of every rank or an MPI "
                         "communicator of the whole job")


def shutdown():
    """Stops Ringlet on this rank; init() may start it again."""
    _process_sets.on_shutdown()
    _ringlet.shutdown()


atexit.register(lambda: _ringlet.is_initialized() and shutdown())

is_initialized = _ringlet.is_initialized
size = _ringlet.size
rank = _ringlet.rank
local_size = _ringlet.local_size
local_rank = _ringlet.local_rank
cross_size = _ringlet.cross_size
cross_rank = _ringlet.cross_rank


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


def start_timeline(file_path, mark_cycles=False):
    """Rank 0 writes a Chrome-trace timeline to ``file_path``."""
    _ringlet.start_timeline(file_path, mark_cycles)


def stop_timeline():
    _ringlet.stop_timeline()


@functools.cache
def _build_info():
    info = {}
    for line in _ringlet.build_info().splitlines():
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    return info


def mpi_threads_supported():
    """Horovod's answer: whether MPI runs at MPI_THREAD_MULTIPLE, so that the
    program may make MPI calls of its own (mpi4py) beside Ringlet's. Raises
    ValueError where MPI is not enabled in this job (mpi_enabled()) or before
    init(), as Horovod does. Ringlet initializes MPI at MPI_THREAD_SERIALIZED
    (False); a program that initialized it first through mpi4py gets mpi4py's
    level."""
    if not mpi_enabled():
        raise ValueError("MPI is not enabled in this job (see mpi_enabled(): launched by mpirun "
                         "and meeting through MPI, or HOROVOD_CPU_OPERATIONS=MPI)")
    if not is_initialized():
        raise ValueError("Ringlet has not been initialized; use hvd.init().")
    mpi4py = sys.modules.get("mpi4py.MPI")
    if mpi4py is None or not mpi4py.Is_initialized():
        return False
    return mpi4py.Query_thread() == mpi4py.THREAD_MULTIPLE


def mpi_built():
    """True when this build can meet the other ranks through MPI (mpirun, srun)."""
    return _build_info().get("mpi") == "yes"


def mpi_enabled():
    """True when this job uses MPI at run time, as Horovod's says: launched by
    mpirun or srun and meeting through MPI (no RINGLET_RENDEZVOUS), or running
    its host collectives through MPI (HOROVOD_CPU_OPERATIONS=MPI)."""
    launched_by_mpi = any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                                    "PMIX_RANK"))
    mpi_operations = os.environ.get("HOROVOD_CPU_OPERATIONS", "").upper() == "MPI"
    return mpi_built() and launched_by_mpi and (
        "RINGLET_RENDEZVOUS" not in os.environ or mpi_operations)


def gloo_built():
    """Ringlet's own controller replaces Gloo: always False."""
    return False


def gloo_enabled():
    return False


def nccl_built():
    """NCCL's version code when this build runs collectives of CUDA tensors on
    NCCL, as nccl.h's NCCL_VERSION_CODE spells it (2.28.9 is 22809; before
    2.9, 2.8.4 was 2804), else 0: Horovod's answer."""
    info = _build_info()
    if info.get("nccl") != "yes":
        return 0
    major, minor, patch = (int(part) for part in info["nccl version"].split("."))
    if major <= 2 and minor <= 8:
        return major * 1000 + minor * 100 + patch
    return major * 10000 + minor * 100 + patch


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    """True when this build was compiled with CUDA: collectives of CUDA tensors
    are served (on a machine with a device)."""
    return _build_info().get("cuda") == "yes"


def rocm_built():
    return False
