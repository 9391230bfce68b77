"""horovod.tensorflow's collectives on TensorFlow tensors, eager and inside
``tf.function``.

Allreduce, grouped allreduce, allgather and broadcast run as the op
library's asynchronous ops (ringlet/tensorflow/ops.py), eager and in a graph
alike, on the tensors' own buffers; the runtime's negotiation matches them by
name, in whatever order TensorFlow runs them.

Without the op library, and for alltoall and reducescatter always, a
collective goes to the core as numpy views: at once when eager, and inside a
``tf.function`` as one ``py_function`` op (TensorFlow runs stateful ops in
program order, so every rank submits them in the order the function makes
them). Those carry Horovod's gradient rules through ``tf.custom_gradient``.
"""

import numpy as np
import tensorflow as tf

from ringlet import _ringlet
from ringlet import numpy as _np_ops
from ringlet.common import basics as _basics
from ringlet.common.basics import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from ringlet.common import handles as _handles
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.tensorflow import ops as _ops
from ringlet.tensorflow.compression import Compression


# What the core reduces; bfloat16 is reduced as float32 (numpy has no
# bfloat16 of its own), the rest only moves as bytes.
_REDUCIBLE = {tf.float16, tf.float32, tf.float64, tf.int8, tf.uint8, tf.int16, tf.uint16,
              tf.int32, tf.int64}


def _numpy(tensor):
    return tensor.numpy() if hasattr(tensor, "numpy") else np.asarray(tensor)


def _in_graph(fn, inputs, out_dtypes):
    """Runs ``fn`` on the inputs' numpy values: at once when eager, else as one op."""
    if tf.executing_eagerly():
        outs = fn(*[_numpy(t) for t in inputs])
        return [tf.convert_to_tensor(o, dtype=d) for o, d in zip(outs, out_dtypes)]

    def eager_fn(*tensors):
        return fn(*[t.numpy() for t in tensors])
    return tf.py_function(eager_fn, list(inputs), list(out_dtypes))


def _check_reducible(dtype):
    if dtype != tf.bfloat16 and dtype not in _REDUCIBLE:
        raise ValueError(f"dtype {dtype.name} is not supported for reductions (float16, "
                         f"bfloat16, float32, float64, int8, uint8, int16, uint16, int32 and "
                         f"int64 are)")


def _check_movable(dtype, call):
    # Both paths refuse alike: the op library's kernels would, and numpy has no bytes of
    # a string tensor to send.
    if dtype in (tf.string, tf.resource, tf.variant):
        raise ValueError(f"ringlet: {call}: dtype {dtype.name} has no fixed element size, so "
                         f"it cannot be sent as bytes")


def _reducible(tensor):
    """(tensor the core reduces, dtype to cast the result back to or None)."""
    _check_reducible(tensor.dtype)
    if tensor.dtype == tf.bfloat16:
        return tf.cast(tensor, tf.float32), tf.bfloat16
    return tensor, None


def _allreduce_dense(tensor, name, op, prescale_factor, postscale_factor, process_set):
    """One allreduce, through the op library where there is one."""
    tensor = tf.convert_to_tensor(tensor)
    full_name = _handles.op_name("allreduce", name, process_set)
    if _ops.library is not None:
        _check_reducible(tensor.dtype)
        return _ops.allreduce([tensor], [full_name], _basics.core_op(op), prescale_factor,
                              postscale_factor, _set_id(process_set))[0]
    src, cast_back = _reducible(tensor)

    def run(x):
        out = np.empty_like(x)
        handle = _ringlet.allreduce_async(full_name, np.ascontiguousarray(x), out,
                                          _basics.core_op(op), float(prescale_factor),
                                          float(postscale_factor), _set_id(process_set))
        _ringlet.synchronize(handle)
        return [out]

    (out,) = _in_graph(run, [src], [src.dtype])
    if hasattr(out, "set_shape"):
        out.set_shape(tensor.shape)
    return tf.cast(out, cast_back) if cast_back is not None else out


def _allreduce_indexed_slices(slices, name, op, process_set):
    # Sparse gradients differ in their indices per rank: gather them whole.
    if op not in (Average, Sum):
        raise ValueError("IndexedSlices can only be reduced with op=Average or op=Sum")
    base = name if name is not None else None
    values = allgather(slices.values, name=None if base is None else f"{base}.values",
                       process_set=process_set)
    indices = allgather(slices.indices, name=None if base is None else f"{base}.indices",
                        process_set=process_set)
    if op == Average:
        members = _ringlet.process_set_size(_set_id(process_set))
        values = values / tf.cast(members, values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """The reduction (Average by default) of ``tensor`` over the ranks.

    ``tf.IndexedSlices`` are gathered whole and summed (or averaged).
    Differentiable: the gradient is the same allreduce of the incoming gradient.
    """
    op = _basics.resolve_op(op, average)
    _basics.core_op(op)  # refuses Adasum and unknown ops at once
    if isinstance(tensor, tf.IndexedSlices):
        return _allreduce_indexed_slices(tensor, name, op, process_set)

    def reduce(x):
        compressed, ctx = compression.compress(x)
        return compression.decompress(_allreduce_dense(compressed, name, op, prescale_factor,
                                                       postscale_factor, process_set), ctx)

    if _ops.library is not None:  # the op's gradient is registered below
        return reduce(tf.convert_to_tensor(tensor))

    @tf.custom_gradient
    def differentiable(x):
        return reduce(x), lambda dy: _allreduce_grad(dy, op, prescale_factor, postscale_factor,
                                                     process_set)
    return differentiable(tf.convert_to_tensor(tensor))


def _by_dtype(tensors):
    """Indices of ``tensors`` by dtype, in first-seen order: the core fuses a group of
    one dtype, so a mixed group is one grouped collective per dtype."""
    groups = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)
    return list(groups.values())


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set, name=None):
    """Reduces a list of tensors as one fused collective (one op in a graph)."""
    op = _basics.resolve_op(op, average)
    core_op = _basics.core_op(op)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    pairs = [compression.compress(t) for t in tensors]
    base = _handles.op_name("grouped_allreduce", name, process_set)
    names = [f"{base}.{i}" for i in range(len(pairs))]
    if _ops.library is not None:
        for c, _ in pairs:
            _check_reducible(c.dtype)
        outs = [None] * len(pairs)
        for members in _by_dtype([c for c, _ in pairs]):
            reduced = _ops.allreduce([pairs[i][0] for i in members], [names[i] for i in members],
                                     core_op, prescale_factor, postscale_factor,
                                     _set_id(process_set))
            for i, out in zip(members, reduced):
                outs[i] = compression.decompress(out, pairs[i][1])
        return outs
    prepared = [_reducible(c) for c, _ in pairs]
    srcs = [s for s, _ in prepared]

    def run(*arrays):
        arrays = [np.ascontiguousarray(a) for a in arrays]
        outs = [np.empty_like(a) for a in arrays]
        handles = []
        for members in _by_dtype(arrays):
            handles += _ringlet.grouped_allreduce_async(
                [names[i] for i in members], [arrays[i] for i in members],
                [outs[i] for i in members], core_op, float(prescale_factor),
                float(postscale_factor), _set_id(process_set))
        for h in handles:
            _ringlet.synchronize(h)
        return outs

    outs = _in_graph(run, srcs, [s.dtype for s in srcs])
    results = []
    for out, t, (_, cast_back), (_, ctx) in zip(outs, tensors, prepared, pairs):
        if hasattr(out, "set_shape"):
            out.set_shape(t.shape)
        if cast_back is not None:
            out = tf.cast(out, cast_back)
        results.append(compression.decompress(out, ctx))
    return results


def _allgather_raw(tensor, name, process_set):
    """One allgather, through the op library where there is one."""
    _check_movable(tensor.dtype, "allgather")
    full_name = _handles.op_name("allgather", name, process_set)
    if _ops.library is not None:
        return _ops.allgather(tensor, full_name, _set_id(process_set))

    def run(x):
        return [_handles.synchronize(_np_ops._allgather_named(np.ascontiguousarray(x), full_name,
                                                              process_set))]

    (out,) = _in_graph(run, [tensor], [tensor.dtype])
    if tensor.shape.rank is not None and hasattr(out, "set_shape"):
        out.set_shape([None] + tensor.shape.as_list()[1:])
    return out


def allgather(tensor, name=None, process_set=global_process_set, ignore_name_scope=False):
    """``tensor`` from every rank concatenated on dimension 0 (differentiable)."""
    tensor = tf.convert_to_tensor(tensor)
    if _ops.library is not None or not tensor.dtype.is_floating:
        return _allgather_raw(tensor, name, process_set)

    @tf.custom_gradient
    def gather(x):
        return (_allgather_raw(x, name, process_set),
                lambda dy: _allgather_grad(x, dy, process_set))
    return gather(tensor)


def _broadcast_raw(tensors, root_rank, names, process_set):
    """Broadcasts several tensors from ``root_rank`` (``names`` given whole): one op
    each with the op library, else one ``py_function`` for all."""
    for t in tensors:
        _check_movable(t.dtype, "broadcast")
    if _ops.library is not None:
        return [_ops.broadcast(t, root_rank, n, _set_id(process_set))
                for t, n in zip(tensors, names)]

    def run(*arrays):
        copies = [np.array(a, copy=True, order="C") for a in arrays]
        handles = [_np_ops._broadcast_named(c, root_rank, n, process_set)
                   for c, n in zip(copies, names)]
        return [_handles.synchronize(h) for h in handles]

    outs = _in_graph(run, tensors, [t.dtype for t in tensors])
    for out, t in zip(outs, tensors):
        if hasattr(out, "set_shape"):
            out.set_shape(t.shape)
    return outs


def broadcast(tensor, root_rank, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """``root_rank``'s ``tensor`` on every rank (differentiable: the gradient is the sum
    of the incoming gradients at the root, zero elsewhere)."""
    tensor = tf.convert_to_tensor(tensor)
    full_name = _handles.op_name("broadcast", name, process_set)
    if _ops.library is not None or not tensor.dtype.is_floating:
        return _broadcast_raw([tensor], root_rank, [full_name], process_set)[0]

    @tf.custom_gradient
    def bcast(x):
        (y,) = _broadcast_raw([x], root_rank, [full_name], process_set)
        return y, lambda dy: _broadcast_grad(dy, root_rank, process_set)
    return bcast(tensor)


# Horovod's gradient rules, written once: the py_function path applies them
# through tf.custom_gradient above, the op library's ops through
# tf.RegisterGradient below. A gradient's collective is unnamed: numbered like
# any other, the same on every rank, since every rank builds the same backward
# pass.

def _allreduce_grad(dy, op, prescale_factor, postscale_factor, process_set):
    """allreduce's: the same allreduce of the incoming gradient."""
    return _allreduce_dense(dy, None, op, prescale_factor, postscale_factor, process_set)


def _allgather_grad(x, dy, process_set):
    """allgather's: this rank's rows of the summed incoming gradient."""
    reduced = _allreduce_dense(dy, None, Sum, 1.0, 1.0, process_set)
    rows = _allgather_raw(tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1]), None, process_set)
    offset = tf.reduce_sum(rows[:_ringlet.process_set_rank(_set_id(process_set))])
    begin = tf.concat([[offset], tf.zeros_like(tf.shape(reduced, out_type=tf.int64)[1:])], 0)
    return tf.slice(reduced, begin, tf.shape(x, out_type=tf.int64))


def _broadcast_grad(dy, root_rank, process_set):
    """broadcast's: the sum of the incoming gradients at the root, zero elsewhere."""
    reduced = _allreduce_dense(dy, None, Sum, 1.0, 1.0, process_set)
    return reduced if _ringlet.rank() == root_rank else tf.zeros_like(reduced)


if _ops.library is not None:
    @tf.RegisterGradient("RingletAllreduce")
    def _registered_allreduce_grad(op, *grads):
        # A fused group's gradients go back as one group too.
        set_id = op.get_attr("process_set_id")
        base = _handles.group_base(None, set_id)
        return _ops.allreduce(list(grads), [f"{base}.{i}" for i in range(len(grads))],
                              op.get_attr("reduce_op"), op.get_attr("prescale_factor"),
                              op.get_attr("postscale_factor"), set_id)

    @tf.RegisterGradient("RingletAllgather")
    def _registered_allgather_grad(op, grad):
        return _allgather_grad(op.inputs[0], grad, op.get_attr("process_set_id"))

    @tf.RegisterGradient("RingletBroadcast")
    def _registered_broadcast_grad(op, grad):
        return _broadcast_grad(grad, op.get_attr("root_rank"), op.get_attr("process_set_id"))


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Scatters rows of ``tensor`` (``splits[i]`` to the i-th member, even when None) and
    gathers the others'; returns (the gathered tensor, the rows received from each rank)."""
    tensor = tf.convert_to_tensor(tensor)
    full_name = _handles.op_name("alltoall", name, process_set)
    split_tensor = tf.zeros([0], tf.int32) if splits is None else tf.cast(splits, tf.int32)

    def run(x, s):
        handle = _np_ops._alltoall_named(np.ascontiguousarray(x), list(s) if s.size else None,
                                         full_name, process_set)
        out, received = _np_ops.synchronize(handle)
        return [out, received.astype(np.int32)]

    out, received = _in_graph(run, [tensor, split_tensor], [tensor.dtype, tf.int32])
    if hasattr(out, "set_shape"):
        out.set_shape([None] + tensor.shape.as_list()[1:])
    return out, received


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """This rank's share of dimension 0 of the reduction of ``tensor`` over the ranks."""
    tensor = tf.convert_to_tensor(tensor)
    core_op = _basics.core_op(op)
    compressed, ctx = compression.compress(tensor)
    src, cast_back = _reducible(compressed)
    full_name = _handles.op_name("reducescatter", name, process_set)

    def run(x):
        x = np.ascontiguousarray(x)
        handle = _ringlet.reducescatter_async(full_name, x, core_op, float(prescale_factor),
                                              float(postscale_factor), _set_id(process_set))
        data, shape, _ = _ringlet.synchronize(handle)
        return [data.view(x.dtype).reshape(shape)]

    (out,) = _in_graph(run, [src], [src.dtype])
    if hasattr(out, "set_shape"):
        out.set_shape([None] + tensor.shape.as_list()[1:])
    if cast_back is not None:
        out = tf.cast(out, cast_back)
    return compression.decompress(out, ctx)


def join():
    """This rank has no more data; returns the last rank to join."""
    return _ringlet.join()


def barrier(process_set=global_process_set):
    _ringlet.barrier(_set_id(process_set))
