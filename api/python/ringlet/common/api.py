"""The names every framework module shares with Horovod's: the basics, the
reduction operations, the process sets and the exceptions a script catches.
Each of ringlet.torch, ringlet.tensorflow, ringlet.keras and ringlet.numpy
starts with ``from ringlet.common.api import *``."""

from ringlet.common.basics import (
    Adasum, Average, Max, Min, Product, Sum, ccl_built, cross_rank, cross_size, cuda_built,
    ddl_built, gloo_built, gloo_enabled, init, is_homogeneous, is_initialized, local_rank,
    local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rank, rocm_built,
    shutdown, size, start_timeline, stop_timeline)
from ringlet.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from ringlet.common.process_sets import (
    ProcessSet, add_process_set, global_process_set, remove_process_set)

__all__ = [
    "Adasum", "Average", "Max", "Min", "Product", "Sum", "ccl_built", "cross_rank",
    "cross_size", "cuda_built", "ddl_built", "gloo_built", "gloo_enabled", "init",
    "is_homogeneous", "is_initialized", "local_rank", "local_size", "mpi_built", "mpi_enabled",
    "mpi_threads_supported", "nccl_built", "rank", "rocm_built", "shutdown", "size",
    "start_timeline", "stop_timeline", "HorovodInternalError", "HostsUpdatedInterrupt",
    "ProcessSet", "add_process_set", "global_process_set", "remove_process_set"]
