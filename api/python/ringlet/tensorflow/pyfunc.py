"""The ``py_function`` path: ringlet.tensorflow's calls where there is no op
library (or ``RINGLET_TENSORFLOW_OPS=0``). Each call submits its collectives to
the core, host tensors as numpy views and GPU tensors as DLPack views of their
device memory (pyfunc_gpu.py), and then waits for them: eagerly, at once; in a
graph (a ``tf.function`` or a ``tf.compat.v1`` graph), as three ops: a
``py_function`` that submits and returns at once, a one-element ``tf.data``
pipeline whose ``py_function`` waits for the result, and a ``py_function`` that
takes the outputs (outside tf.data, which runs on the CPU: GPU outputs stay
where they are).

TensorFlow runs that wait on tf.data's own unbounded thread pool, so waiting
collectives never hold the inter-op threads: a session may start the
independent ops of a run in any order, and every collective of the run still
gets submitted, however many there are. Inside a ``tf.function`` the
submitting ops, being stateful, run in program order.

Every collective function here has the same signature and meaning as its
namesake in ops.py: lists of tensors in, lists out, names given whole.
"""

import itertools

import numpy as np
import tensorflow as tf

from ringlet import _ringlet
from ringlet import numpy as _np_ops
from ringlet.common import basics as _basics
from ringlet.common import exceptions
from ringlet.common import handles as _handles
from ringlet.tensorflow import errors
from ringlet.tensorflow import pyfunc_gpu as _gpu


def _numpy(tensor):
    return tensor.numpy() if hasattr(tensor, "numpy") else np.asarray(tensor)


def _c_array(array):
    """``array`` C-ordered with row-major strides. An empty array has zero strides
    (numpy 2), which the binding's contiguity check takes for a strided view: it gets
    row-major ones, harmless since it has no elements."""
    array = np.asarray(array)
    if array.size == 0:
        strides = [array.itemsize] * array.ndim
        for i in range(array.ndim - 2, -1, -1):
            strides[i] = strides[i + 1] * max(array.shape[i + 1], 1)
        return np.lib.stride_tricks.as_strided(array, strides=strides)
    return np.ascontiguousarray(array) if not array.flags.c_contiguous else array


def _failure(error):
    """An exception raised by a call when eager: Ringlet's, as errors.as_tf_error
    makes it; any other refusal of the arguments is an invalid argument."""
    if isinstance(error, errors.RINGLET_ERRORS):
        return errors.as_tf_error(error)
    return errors.as_tf_error(exceptions.InvalidArgumentError(str(error)))


# Submitted in a graph and not collected yet, by key: (finish, handles, the
# inputs, kept referenced because the core reads their buffers).
_started = {}
# Collected and not taken yet, by key: the outputs.
_finished = {}
_keys = itertools.count()
_basics.call_at_init(_started.clear)
_basics.call_at_init(_finished.clear)


def _release(key):
    """Drops what a run submitted under ``key`` and never collected (the run was
    cancelled between the two steps), synchronizing its collectives if they are
    done. One still in flight is left, to be released the next time."""
    _finished.pop(key, None)
    entry = _started.get(key)
    if entry is None:
        return
    finish, handles, _inputs = entry
    try:
        done = all(_handles.poll(h) for h in handles)
    except exceptions.FAILURES:
        done = True  # unknown to the core: a runtime that has gone
    if done and _started.pop(key, None) is not None and handles:
        try:
            finish()
        except exceptions.FAILURES:
            pass  # the failure was its run's, which has ended


def _begin(start):
    # A graph's op runs once per run, and the runs of one graph do not overlap
    # (their collectives have the same names): when the op runs again, what it
    # submitted last and nobody collected belongs to a run that has ended.
    last = []

    def begin(*tensors):
        while last:
            _release(last.pop())
        key = next(_keys)
        handles, finish = start(*tensors)
        _started[key] = (finish, handles, tensors)
        last.append(key)
        return np.int64(key)
    return begin


def _released_error():
    return exceptions.HorovodInternalError(
        f"ringlet on rank {_ringlet.rank()}: a collective's result was released "
        f"before this run collected it: its op ran again in another run meanwhile")


def _collect(key):
    """Waits for what the run submitted under ``key`` and keeps its outputs for _take."""
    entry = _started.pop(int(key), None)
    if entry is None:
        raise _released_error()
    finish, _handles_, _inputs = entry
    _finished[int(key)] = finish()
    return key


def _take(key):
    outs = _finished.pop(int(key), None)
    if outs is None:
        raise _released_error()
    return outs


def run(start, inputs, out_dtypes, name=None):
    """Runs one call: ``start(*tensors)`` submits its collectives on the inputs (eager
    tensors, or numpy values) and returns (their handles, a function returning the
    outputs once they are done, as numpy values or tensors of ``out_dtypes``).
    Returns the list of outputs."""
    if tf.executing_eagerly():
        try:
            _, finish = start(*inputs)
            outs = finish()
        except (ValueError,) + errors.RINGLET_ERRORS as e:
            raise _failure(e) from None
        return [tf.convert_to_tensor(o, dtype=d) for o, d in zip(outs, out_dtypes)]
    key = tf.py_function(_begin(start), list(inputs), tf.int64, name=name)
    collected = tf.data.Dataset.from_tensors(key).map(
        lambda k: tf.py_function(_collect, [k], tf.int64)).get_single_element()
    return list(tf.py_function(_take, [collected], list(out_dtypes)))


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


def _registered(handles):
    """(handles, finish) for handles registered with ringlet.common.handles."""
    return handles, lambda: _handles.wait_all(handles, _handles.synchronize)


def allreduce(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    prepared = [_as_reduced(t) for t in tensors]
    # The core numbers groups in the order they are submitted, which only eager calls
    # keep the same on every rank; in a graph the members go alone, fused as they meet.
    as_group = tf.executing_eagerly()

    def start(*tensors):
        if _gpu.on_gpu(tensors):
            return _gpu.allreduce(tensors, names, core_op, prescale_factor, postscale_factor,
                                  process_set_id, as_group)
        arrays = [_c_array(_numpy(t)) for t in tensors]
        outs = [np.empty_like(a) for a in arrays]
        scales = (float(prescale_factor), float(postscale_factor), process_set_id)
        handles = []
        for members in _by_dtype(arrays):
            if as_group and len(members) > 1:
                handles += _ringlet.grouped_allreduce_async(
                    [names[i] for i in members], [arrays[i] for i in members],
                    [outs[i] for i in members], core_op, *scales)
            else:
                handles += [_ringlet.allreduce_async(names[i], arrays[i], outs[i], core_op,
                                                     *scales) for i in members]

        def finish():
            _handles.wait_all(handles, _ringlet.synchronize)
            return outs
        return handles, finish

    outs = run(start, [src for src, _ in prepared], [src.dtype for src, _ in prepared])
    results = []
    for out, t, (_, cast_back) in zip(outs, tensors, prepared):
        if hasattr(out, "set_shape"):
            out.set_shape(t.shape)
        results.append(tf.cast(out, cast_back) if cast_back is not None else out)
    return results


def allgather(tensors, names, process_set_id):
    def start(*tensors):
        if _gpu.on_gpu(tensors):
            return _gpu.allgather(tensors, names, process_set_id)
        return _registered([_np_ops._allgather_named(_c_array(_numpy(t)), n,
                                                     process_set_id)
                            for t, n in zip(tensors, names)])

    outs = run(start, tensors, [t.dtype for t in tensors])
    return [_with_rows_unknown(out, t) for out, t in zip(outs, tensors)]


def broadcast(tensors, root_rank, names, process_set_id):
    def start(*tensors):
        if _gpu.on_gpu(tensors):
            return _gpu.broadcast(tensors, root_rank, names, process_set_id)
        copies = [_c_array(np.array(_numpy(t), copy=True, order="C")) for t in tensors]
        return _registered([_np_ops._broadcast_named(c, root_rank, n, process_set_id)
                            for c, n in zip(copies, names)])

    outs = run(start, tensors, [t.dtype for t in tensors])
    for out, t in zip(outs, tensors):
        if hasattr(out, "set_shape"):
            out.set_shape(t.shape)
    return outs


def reducescatter(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    prepared = [_as_reduced(t) for t in tensors]

    def start(*tensors):
        if _gpu.on_gpu(tensors):
            return _gpu.reducescatter(tensors, names, core_op, prescale_factor,
                                      postscale_factor, process_set_id)
        arrays = [_c_array(_numpy(t)) for t in tensors]
        handles = [_ringlet.reducescatter_async(n, a, core_op, float(prescale_factor),
                                                float(postscale_factor), process_set_id)
                   for a, n in zip(arrays, names)]

        def finish():
            results = _handles.wait_all(handles, _ringlet.synchronize)
            return [data.view(a.dtype).reshape(shape)
                    for a, (data, shape, _) in zip(arrays, results)]
        return handles, finish

    outs = run(start, [src for src, _ in prepared], [src.dtype for src, _ in prepared])
    results = []
    for out, t, (_, cast_back) in zip(outs, tensors, prepared):
        out = _with_rows_unknown(out, t)
        results.append(tf.cast(out, cast_back) if cast_back is not None else out)
    return results


def alltoall(tensor, splits, name, process_set_id):
    """(the gathered rows, the rows received from each member); ``splits`` is an
    int32 vector, empty for an even split."""
    def start(x, s):
        rows = [int(v) for v in _numpy(s)]
        where = f"ringlet: alltoall of '{name}' on rank {_ringlet.rank()}"
        if any(v < 0 for v in rows):
            raise exceptions.InvalidArgumentError(f"{where}: splits hold a negative value "
                                                  f"({rows})")
        if rows and sum(rows) > x.shape[0]:
            raise exceptions.InvalidArgumentError(
                f"{where}: splits add up to {sum(rows)}, more than the first dimension "
                f"{x.shape[0]}")
        if _gpu.on_gpu([x]):
            return _gpu.alltoall(x, rows, name, process_set_id)
        x = _numpy(x)
        if rows:  # as in Horovod, rows past the splits are not sent
            x = x[:sum(rows)]
        handle = _np_ops._alltoall_named(_c_array(x), rows or None, name,
                                         process_set_id)

        def finish():
            out, received = _handles.synchronize(handle)
            return [out, received.astype(np.int32)]
        return [handle], finish

    out, received = run(start, [tensor, splits], [tensor.dtype, tf.int32])
    if hasattr(received, "set_shape"):
        received.set_shape([None])
    return _with_rows_unknown(out, tensor), received


def _at_once(value):
    """A call without collectives: ``value()``, computed where the others wait."""
    return lambda: ([], lambda: [value()])


def join():
    (last,) = run(_at_once(lambda: np.int32(_ringlet.join())), [], [tf.int32])
    if hasattr(last, "set_shape"):
        last.set_shape([])
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
    (value,) = run(_at_once(lambda: np.int32(_QUERIES[what](process_set_id))), [], [tf.int32],
                   name)
    if hasattr(value, "set_shape"):
        value.set_shape([])
    return value
