"""``import ringlet.numpy as hvd``: the collectives on numpy arrays.

The names, arguments and defaults are ringlet.torch's (Horovod's), without
autograd and compression: ``allreduce`` (Average by default), ``allgather``,
``broadcast``, ``alltoall``, ``reducescatter``, the grouped, in-place
(trailing underscore) and ``*_async`` forms, ``synchronize``, ``poll``,
``join``, ``barrier``, ``broadcast_object`` and ``allgather_object``.
Arrays must be C-contiguous.
"""

import pickle

import numpy as np

from ringlet import _ringlet
from ringlet.common import handles as _handles
from ringlet.common.api import *  # noqa: F401,F403  (Horovod's shared names)
from ringlet.common.basics import (
    Average, core_op as _core_op, rank, resolve_op as _resolve_op)
from ringlet.common.process_sets import global_process_set, id_of as _set_id

poll = _handles.poll
synchronize = _handles.synchronize

_REDUCIBLE = {np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.uint8,
                                    np.int16, np.uint16, np.int32, np.int64)}


def _array(array, call):
    array = np.asarray(array)
    if not array.flags.c_contiguous:
        raise ValueError(f"{call}: the array is not C-contiguous; pass np.ascontiguousarray(a)")
    return array


def _rows_of_bytes(array):
    """An array of a dtype the core does not reduce, as uint8 rows (dim 0 kept)."""
    return array.reshape(array.shape[0], -1).view(np.uint8)


def _rows_from_bytes(data, shape, dtype, trailing):
    rows = shape[0]
    if data.size == 0:
        return np.empty((rows,) + trailing, dtype=dtype)
    return data.reshape(rows, -1).view(dtype).reshape((rows,) + trailing)


def allreduce_async(array, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    array = _array(array, "allreduce")
    return _allreduce_async(array, np.empty_like(array), name, _resolve_op(op, average),
                            prescale_factor, postscale_factor, process_set)


def allreduce_async_(array, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    array = _array(array, "allreduce")
    return _allreduce_async(array, array, name, _resolve_op(op, average), prescale_factor,
                            postscale_factor, process_set)


def _allreduce_async(array, output, name, op, prescale_factor, postscale_factor, process_set):
    full_name = _handles.op_name("allreduce", name, process_set)
    handle = _ringlet.allreduce_async(full_name, array, output, _core_op(op),
                                      float(prescale_factor), float(postscale_factor),
                                      _set_id(process_set))
    return _handles.register(handle, lambda data, shape, splits: output, array, output)


def allreduce(array, average=None, name=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """The reduction (Average by default) of ``array`` over the ranks, as a new array."""
    return synchronize(allreduce_async(array, average, name, op, prescale_factor,
                                       postscale_factor, process_set))


def allreduce_(array, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``array`` over the ranks in place and returns it."""
    return synchronize(allreduce_async_(array, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def grouped_allreduce_async(arrays, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set, _out=None):
    arrays = [_array(a, "grouped_allreduce") for a in arrays]
    if not arrays:
        raise ValueError("grouped_allreduce: the list of arrays is empty")
    outputs = _out if _out is not None else [np.empty_like(a) for a in arrays]
    base = _handles.op_name("grouped_allreduce", name, process_set)
    names = [f"{base}.{i}" for i in range(len(arrays))]
    handles = _ringlet.grouped_allreduce_async(names, arrays, outputs,
                                               _core_op(_resolve_op(op, average)),
                                               float(prescale_factor), float(postscale_factor),
                                               _set_id(process_set))
    return [_handles.register(h, lambda data, shape, splits, out=out: out, a, out)
            for h, a, out in zip(handles, arrays, outputs)]


def grouped_allreduce(arrays, average=None, name=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of arrays as one fused collective; returns the list of results."""
    return [synchronize(h) for h in grouped_allreduce_async(
        arrays, average, name, op, prescale_factor, postscale_factor, process_set)]


def grouped_allreduce_(arrays, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    arrays = [_array(a, "grouped_allreduce") for a in arrays]
    return [synchronize(h) for h in grouped_allreduce_async(
        arrays, average, name, op, prescale_factor, postscale_factor, process_set, arrays)]


def _rows_result(data, shape, dtype, trailing):
    """The result of a collective on rows (allgather, alltoall) as ``dtype``."""
    if dtype in _REDUCIBLE:
        return data.view(dtype).reshape(shape)
    return _rows_from_bytes(data, shape, dtype, trailing)


def _allgather_named(array, full_name, process_set):
    """allgather_async under a name given whole (the TensorFlow module names its own)."""
    array = _array(array, "allgather")
    if array.ndim == 0:
        raise ValueError(f"allgather '{full_name}': a scalar has no axis 0 to concatenate on")
    dtype, trailing = array.dtype, array.shape[1:]
    src = array if dtype in _REDUCIBLE else _rows_of_bytes(array)
    handle = _ringlet.allgather_async(full_name, src, _set_id(process_set))
    return _handles.register(
        handle, lambda data, shape, splits: _rows_result(data, shape, dtype, trailing), src)


def allgather_async(array, name=None, process_set=global_process_set):
    """Starts concatenating ``array`` from every rank on axis 0 (ranks may differ in it)."""
    return _allgather_named(array, _handles.op_name("allgather", name, process_set), process_set)


def allgather(array, name=None, process_set=global_process_set):
    """``array`` from every rank concatenated on axis 0."""
    return synchronize(allgather_async(array, name, process_set))


def grouped_allgather(arrays, name=None, process_set=global_process_set):
    base = _handles.group_base(name, process_set)
    handles = [allgather_async(a, f"{base}.{i}", process_set) for i, a in enumerate(arrays)]
    return [synchronize(h) for h in handles]


def _broadcast_named(array, root_rank, full_name, process_set):
    """broadcast_async_ under a name given whole."""
    array = _array(array, "broadcast")
    view = array if array.dtype in _REDUCIBLE else array.reshape(-1).view(np.uint8)
    handle = _ringlet.broadcast_async(full_name, view, int(root_rank), _set_id(process_set))
    return _handles.register(handle, lambda data, shape, splits: array, view)


def broadcast_async_(array, root_rank, name=None, process_set=global_process_set):
    """Starts overwriting ``array`` with ``root_rank``'s on every rank."""
    return _broadcast_named(array, root_rank, _handles.op_name("broadcast", name, process_set),
                            process_set)


def broadcast_async(array, root_rank, name=None, process_set=global_process_set):
    """Starts sending ``root_rank``'s array to every rank, into a new array."""
    return broadcast_async_(np.array(array, copy=True, order="C"), root_rank, name, process_set)


def broadcast(array, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s ``array`` on every rank, as a new array."""
    return synchronize(broadcast_async(array, root_rank, name, process_set))


def broadcast_(array, root_rank, name=None, process_set=global_process_set):
    """Overwrites ``array`` with ``root_rank``'s on every rank and returns it."""
    return synchronize(broadcast_async_(array, root_rank, name, process_set))


def _alltoall_named(array, splits, full_name, process_set):
    """alltoall_async under a name given whole."""
    array = _array(array, "alltoall")
    if array.ndim == 0:
        raise ValueError(f"alltoall '{full_name}': a scalar has no rows to scatter")
    dtype, trailing = array.dtype, array.shape[1:]
    src = array if dtype in _REDUCIBLE else _rows_of_bytes(array)
    split_list = [] if splits is None else [int(s) for s in splits]
    handle = _ringlet.alltoall_async(full_name, src, split_list, _set_id(process_set))
    return _handles.register(
        handle, lambda data, shape, received: (_rows_result(data, shape, dtype, trailing),
                                               np.asarray(received, dtype=np.int32)), src)


def alltoall_async(array, splits=None, name=None, process_set=global_process_set):
    """Starts scattering rows of ``array``: ``splits[i]`` rows to the i-th member."""
    return _alltoall_named(array, splits, _handles.op_name("alltoall", name, process_set),
                           process_set)


def alltoall(array, splits=None, name=None, process_set=global_process_set):
    """Rows scattered to the ranks and theirs gathered here; with ``splits`` given, also
    the rows received from each rank."""
    out, received = synchronize(alltoall_async(array, splits, name, process_set))
    return out if splits is None else (out, received)


def reducescatter_async(array, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    array = _array(array, "reducescatter")
    full_name = _handles.op_name("reducescatter", name, process_set)
    if array.ndim == 0:
        raise ValueError(f"reducescatter '{full_name}': a scalar has no rows to scatter")
    dtype = array.dtype
    handle = _ringlet.reducescatter_async(full_name, array, _core_op(op), float(prescale_factor),
                                          float(postscale_factor), _set_id(process_set))
    return _handles.register(handle, lambda data, shape, splits: data.view(dtype).reshape(shape),
                             array)


def reducescatter(array, name=None, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share (of axis 0) of the reduction of ``array`` over the ranks."""
    return synchronize(reducescatter_async(array, name, op, process_set, prescale_factor,
                                           postscale_factor))


def grouped_reducescatter(arrays, name=None, op=Average, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    base = _handles.group_base(name, process_set)
    handles = [reducescatter_async(a, f"{base}.{i}", op, process_set, prescale_factor,
                                   postscale_factor) for i, a in enumerate(arrays)]
    return [synchronize(h) for h in handles]


def join():
    """This rank has no more data; returns the last rank to join."""
    return _ringlet.join()


def barrier(process_set=global_process_set):
    _ringlet.barrier(_set_id(process_set))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """``root_rank``'s ``obj`` (anything picklable) on every member of ``process_set``."""
    name = name or "broadcast_object"
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if rank() == root_rank else None
    length = np.array([0 if payload is None else payload.size], dtype=np.int64)
    broadcast_(length, root_rank, f"{name}.size", process_set)
    if payload is None:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    else:
        payload = payload.copy()
    broadcast_(payload, root_rank, f"{name}.data", process_set)
    return obj if rank() == root_rank else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every member's ``obj`` (anything picklable), in rank order."""
    name = name or "allgather_object"
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    lengths = allgather(np.array([payload.size], dtype=np.int64), f"{name}.sizes", process_set)
    data = allgather(payload, f"{name}.data", process_set)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [pickle.loads(data[offsets[i]:offsets[i + 1]].tobytes()) for i in range(len(lengths))]
