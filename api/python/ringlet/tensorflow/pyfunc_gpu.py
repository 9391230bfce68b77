"""GPU tensors on the ``py_function`` path (ringlet/tensorflow/pyfunc.py): each
collective submits DLPack views of the tensors' device memory, so that NCCL or
Ringlet's CUDA IPC algorithms run on it, never a copy through ``.numpy()``.

TensorFlow's DLPack labels a tensor with the N of its /GPU:N, which is CUDA's
ordinal only while TensorFlow sees every GPU: after
``tf.config.set_visible_devices(gpus[hvd.local_rank()], 'GPU')`` rank 1's only
/GPU:0 is CUDA's device 1. The core gets the ordinal of the physical device
TensorFlow maps /GPU:N to (its platform device id), and results come back
labelled with TensorFlow's N.

Python sees no TensorFlow stream to order the core's work on: before the
inputs are submitted the devices are waited for
(``tf.test.experimental.sync_devices``), so that the work that produced them is
done; a result the core allocated is copied into TensorFlow's own memory
(``Snapshot``) and the devices waited for again before the core's buffer is let
go, since TensorFlow frees memory it did not allocate without regard to what
its stream still has to read. The op library (ringlet_tf_ops.cc) orders all of
this on TensorFlow's stream instead, without waiting.

Every function returns what pyfunc's ``start`` functions return: (handles, a
function returning the outputs once they are done).
"""

import functools

import numpy as np
import tensorflow as tf

from ringlet import _ringlet
from ringlet.common import handles as _handles

# The dtypes the core reduces and takes as DLPack; the others move as bytes.
_REDUCIBLE = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.uint8, tf.int16,
              tf.uint16, tf.int32, tf.int64)


def on_gpu(tensors):
    """Whether any of ``tensors`` is an eager tensor in a GPU's memory."""
    return any(isinstance(t, tf.Tensor) and "GPU" in getattr(t, "device", "")
               .upper().rsplit("/", 1)[-1] for t in tensors)


@functools.lru_cache(maxsize=None)
def _ordinals():
    """CUDA's ordinal of each of TensorFlow's GPUs, by the N of /GPU:N: TensorFlow
    numbers the visible physical GPUs in order, several times where a GPU is
    split into logical devices; a physical GPU's name ends in its platform id."""
    ordinals = []
    for device in tf.config.get_visible_devices("GPU"):
        platform_id = int(device.name.rsplit(":", 1)[1])
        logical = tf.config.get_logical_device_configuration(device)
        ordinals += [platform_id] * (len(logical) if logical else 1)
    return tuple(ordinals)


def _index(tensor):
    return tf.DeviceSpec.from_string(tensor.device).device_index or 0


def _ordinal(tensor):
    if not on_gpu([tensor]):
        raise ValueError(f"ringlet: a call of GPU tensors also has one on {tensor.device}; "
                         f"pass the tensors of one call on one device")
    index = _index(tensor)
    ordinals = _ordinals()
    if index >= len(ordinals):
        raise ValueError(f"ringlet: tensor on {tensor.device}, which is not one of "
                         f"TensorFlow's {len(ordinals)} visible GPUs")
    return ordinals[index]


def _sync():
    tf.test.experimental.sync_devices()


def _as_moved(tensor):
    """The tensor the core moves: itself, or for a dtype it does not reduce its
    rows as bytes (rows x element bytes)."""
    if tensor.dtype in _REDUCIBLE:
        return tensor
    if tensor.dtype == tf.bool:
        data = tf.cast(tensor, tf.uint8)
    else:
        data = tf.bitcast(tensor, tf.uint8)
    return tf.reshape(data, [tf.shape(tensor)[0], -1]) if tensor.shape.rank else data


def _as_dtype(data, dtype, shape):
    """Bytes the core returned, as ``dtype`` of ``shape``."""
    if dtype == tf.uint8:
        return tf.reshape(data, shape)
    if dtype == tf.bool:
        return tf.reshape(tf.cast(data, tf.bool), shape)
    return tf.reshape(tf.bitcast(tf.reshape(data, [-1, dtype.size]), dtype), shape)


def _view(tensor):
    return tf.experimental.dlpack.to_dlpack(tensor)


def _result(handle, device, dtype, shape_of=None):
    """The result of a collective with a core-allocated output, in TensorFlow's memory
    on ``device`` (the inputs' tensor), as ``dtype``; (tensor, received splits)."""
    data, shape, splits = _ringlet.synchronize(handle, dlpack_device=_index(device))
    shape = list(shape_of(shape) if shape_of else shape)
    with tf.device(device.device):
        if data is None or int(np.prod(shape)) == 0:
            return tf.zeros(shape, dtype), splits
        adopted = tf.experimental.dlpack.from_dlpack(data.__dlpack__())
        owned = tf.raw_ops.Snapshot(input=adopted)
        _sync()  # the copy is done before the core's buffer goes
        del adopted, data
        return _as_dtype(owned, dtype, shape), splits


def allreduce(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id,
              as_group):
    outs = []
    for t in tensors:
        with tf.device(t.device):
            outs.append(tf.zeros(tf.shape(t), t.dtype))  # new memory, written by the core
    _sync()
    scales = (core_op, float(prescale_factor), float(postscale_factor), process_set_id)
    handles = []
    groups = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)
    for members in groups.values():
        if as_group and len(members) > 1:
            handles += _ringlet.grouped_allreduce_async(
                [names[i] for i in members], [_view(tensors[i]) for i in members],
                [_view(outs[i]) for i in members], *scales,
                device=_ordinal(tensors[members[0]]))
        else:
            handles += [_ringlet.allreduce_async(names[i], _view(tensors[i]), _view(outs[i]),
                                                 *scales, device=_ordinal(tensors[i]))
                        for i in members]
    return handles, lambda: (_handles.wait_all(handles, _ringlet.synchronize), outs)[1]


def allgather(tensors, names, process_set_id):
    moved = [_as_moved(t) for t in tensors]
    _sync()
    handles = [_ringlet.allgather_async(n, _view(m), process_set_id, device=_ordinal(t))
               for t, m, n in zip(tensors, moved, names)]

    def finish():
        def one(i_handle):
            i, h = i_handle
            t = tensors[i]
            return _result(h, t, t.dtype, lambda s: [s[0]] + t.shape.as_list()[1:])[0]
        return _handles.wait_all(list(enumerate(handles)), one)
    return handles, finish


def broadcast(tensors, root_rank, names, process_set_id):
    # In place, on copies in TensorFlow's memory (the inputs stay as they are).
    copies = []
    for t in tensors:
        with tf.device(t.device):
            copies.append(tf.raw_ops.Snapshot(input=_as_moved(t)))
    _sync()
    handles = [_ringlet.broadcast_async(n, _view(c), int(root_rank), process_set_id,
                                        device=_ordinal(t))
               for t, c, n in zip(tensors, copies, names)]

    def finish():
        _handles.wait_all(handles, _ringlet.synchronize)
        return [c if c.dtype == t.dtype else _as_dtype(c, t.dtype, tf.shape(t))
                for t, c in zip(tensors, copies)]
    return handles, finish


def reducescatter(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    _sync()
    handles = [_ringlet.reducescatter_async(n, _view(t), core_op, float(prescale_factor),
                                            float(postscale_factor), process_set_id,
                                            device=_ordinal(t))
               for t, n in zip(tensors, names)]

    def finish():
        return _handles.wait_all(list(zip(tensors, handles)),
                     lambda th: _result(th[1], th[0], th[0].dtype)[0])
    return handles, finish


def alltoall(tensor, rows, name, process_set_id):
    """``rows``: the rows to each member (empty: an even split), checked already."""
    moved = _as_moved(tensor[:sum(rows)] if rows else tensor)
    _sync()
    handle = _ringlet.alltoall_async(name, _view(moved), rows, process_set_id,
                                     device=_ordinal(tensor))

    def finish():
        trailing = tensor.shape.as_list()[1:]
        out, splits = _result(handle, tensor, tensor.dtype, lambda s: [s[0]] + trailing)
        return [out, np.asarray(splits, dtype=np.int32)]
    return [handle], finish
