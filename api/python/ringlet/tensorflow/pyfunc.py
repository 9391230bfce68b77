"""The ``py_function`` path: ringlet.tensorflow's calls where there is no op
library (or ``RINGLET_TENSORFLOW_OPS=0``). Each call goes to the core as numpy
views: at once when eager, and in a graph as one ``tf.py_function`` op that
submits its collectives and waits for them when the graph runs.

Inside a ``tf.function`` TensorFlow runs these stateful ops in program order,
so every rank submits the same sequence. In a ``tf.compat.v1`` graph a
session may start independent ones in any order: each holds an inter-op
thread while it waits, so a run should not have more of them in flight than
the session has inter-op threads (the grouped calls make one op of many).

Every function here has the same signature and meaning as its namesake in
ops.py: lists of tensors in, lists out, names given whole.
"""

import numpy as np
import tensorflow as tf

from ringlet import _ringlet
from ringlet import numpy as _np_ops
from ringlet.common import exceptions
from ringlet.common import handles as _handles
from ringlet.tensorflow import errors


def _numpy(tensor):
    return tensor.numpy() if hasattr(tensor, "numpy") else np.asarray(tensor)


def _failure(error):
    """An exception raised by a call when eager: Ringlet's, as errors.as_tf_error
    makes it; any other refusal of the arguments is an invalid argument."""
    if isinstance(error, errors.RINGLET_ERRORS):
        return errors.as_tf_error(error)
    failure = exceptions.InvalidArgumentError(str(error))
    return errors.as_tf_error(failure)


def run(fn, inputs, out_dtypes, name=None):
    """``fn`` on the inputs' numpy values, returning numpy values of ``out_dtypes``:
    at once when eager, else as one ``py_function`` op (a list of outputs)."""
    if tf.executing_eagerly():
        try:
            outs = fn(*[_numpy(t) for t in inputs])
        except (ValueError,) + errors.RINGLET_ERRORS as e:
            raise _failure(e) from None
        return [tf.convert_to_tensor(o, dtype=d) for o, d in zip(outs, out_dtypes)]

    def eager_fn(*tensors):
        return fn(*[t.numpy() for t in tensors])
    return tf.py_function(eager_fn, list(inputs), list(out_dtypes), name=name)


def _by_dtype(arrays):
    """Indices of ``arrays`` by dtype, in first-seen order: the core fuses a group of
    one dtype, so a mixed group is one grouped collective per dtype."""
    groups = {}
    for i, a in enumerate(arrays):
        groups.setdefault(a.dtype, []).append(i)
    return list(groups.values())


def _as_reduced(tensor):
    """(the tensor the core reduces, the dtype to cast the result back to or None):
    numpy has no bfloat16 of its own, so bfloat16 is reduced as float32."""
    if tensor.dtype == tf.bfloat16:
        return tf.cast(tensor, tf.float32), tf.bfloat16
    return tensor, None


def _with_rows_unknown(out, tensor):
    if tensor.shape.rank is not None and hasattr(out, "set_shape"):
        out.set_shape([None] + tensor.shape.as_list()[1:])
    return out


def allreduce(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    prepared = [_as_reduced(t) for t in tensors]

    def reduce(*arrays):
        arrays = [np.asarray(a, order="C") for a in arrays]
        outs = [np.empty_like(a) for a in arrays]
        handles = []
        for members in _by_dtype(arrays):
            handles += _ringlet.grouped_allreduce_async(
                [names[i] for i in members], [arrays[i] for i in members],
                [outs[i] for i in members], core_op, float(prescale_factor),
                float(postscale_factor), process_set_id)
        for h in handles:
            _ringlet.synchronize(h)
        return outs

    outs = run(reduce, [src for src, _ in prepared], [src.dtype for src, _ in prepared])
    results = []
    for out, t, (_, cast_back) in zip(outs, tensors, prepared):
        if hasattr(out, "set_shape"):
            out.set_shape(t.shape)
        results.append(tf.cast(out, cast_back) if cast_back is not None else out)
    return results


def allgather(tensors, names, process_set_id):
    def gather(*arrays):
        handles = [_np_ops._allgather_named(np.asarray(a, order="C"), n, process_set_id)
                   for a, n in zip(arrays, names)]
        return [_handles.synchronize(h) for h in handles]

    outs = run(gather, tensors, [t.dtype for t in tensors])
    return [_with_rows_unknown(out, t) for out, t in zip(outs, tensors)]


def broadcast(tensors, root_rank, names, process_set_id):
    def bcast(*arrays):
        copies = [np.array(a, copy=True, order="C") for a in arrays]
        handles = [_np_ops._broadcast_named(c, root_rank, n, process_set_id)
                   for c, n in zip(copies, names)]
        return [_handles.synchronize(h) for h in handles]

    outs = run(bcast, tensors, [t.dtype for t in tensors])
    for out, t in zip(outs, tensors):
        if hasattr(out, "set_shape"):
            out.set_shape(t.shape)
    return outs


def reducescatter(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    prepared = [_as_reduced(t) for t in tensors]

    def scatter(*arrays):
        arrays = [np.asarray(a, order="C") for a in arrays]
        handles = [_ringlet.reducescatter_async(n, a, core_op, float(prescale_factor),
                                                float(postscale_factor), process_set_id)
                   for a, n in zip(arrays, names)]
        outs = []
        for a, h in zip(arrays, handles):
            data, shape, _ = _ringlet.synchronize(h)
            outs.append(data.view(a.dtype).reshape(shape))
        return outs

    outs = run(scatter, [src for src, _ in prepared], [src.dtype for src, _ in prepared])
    results = []
    for out, t, (_, cast_back) in zip(outs, tensors, prepared):
        out = _with_rows_unknown(out, t)
        results.append(tf.cast(out, cast_back) if cast_back is not None else out)
    return results


def alltoall(tensor, splits, name, process_set_id):
    """(the gathered rows, the rows received from each member); ``splits`` is an
    int32 vector, empty for an even split."""
    def exchange(x, s):
        rows = [int(v) for v in s]
        if any(v < 0 for v in rows):
            raise exceptions.InvalidArgumentError(
                f"ringlet: alltoall of '{name}' on rank {_ringlet.rank()}: splits hold a "
                f"negative value ({rows})")
        if rows and sum(rows) > x.shape[0]:
            raise exceptions.InvalidArgumentError(
                f"ringlet: alltoall of '{name}' on rank {_ringlet.rank()}: splits add up to "
                f"{sum(rows)}, more than the first dimension {x.shape[0]}")
        if rows:  # as in Horovod, rows past the splits are not sent
            x = x[:sum(rows)]
        out, received = _handles.synchronize(
            _np_ops._alltoall_named(np.asarray(x, order="C"), rows or None, name,
                                    process_set_id))
        return [out, received.astype(np.int32)]

    out, received = run(exchange, [tensor, splits], [tensor.dtype, tf.int32])
    if hasattr(received, "set_shape"):
        received.set_shape([None])
    return _with_rows_unknown(out, tensor), received


def join():
    (last,) = run(lambda: [np.int32(_ringlet.join())], [], [tf.int32])
    return last


# Horovod's value for a process set this rank does not know.
_UNKNOWN_SET = -3


def _set_query(process_set_id, fn):
    if not _ringlet.is_initialized():
        _ringlet.size()  # raises: not initialized
    try:
        return fn(process_set_id)
    except exceptions.InvalidArgumentError:
        return _UNKNOWN_SET


_QUERIES = {
    "rank": lambda _: _ringlet.rank(),
    "local_rank": lambda _: _ringlet.local_rank(),
    "local_size": lambda _: _ringlet.local_size(),
    "cross_rank": lambda _: _ringlet.cross_rank(),
    "cross_size": lambda _: _ringlet.cross_size(),
    "size": lambda i: _set_query(i, _ringlet.process_set_size),
    "process_set_included": lambda i: _set_query(
        i, lambda j: int(_ringlet.process_set_rank(j) >= 0)),
}


def query(what, process_set_id=0, name=None):
    """An int32 scalar: ``what`` (a key of _QUERIES) read when the op runs."""
    (value,) = run(lambda: [np.int32(_QUERIES[what](process_set_id))], [], [tf.int32], name)
    if hasattr(value, "set_shape"):
        value.set_shape([])
    return value
