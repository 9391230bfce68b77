"""The ``py_function`` path: ringlet.tensorflow's calls where there is no op
library (or ``RINGLET_TENSORFLOW_OPS=0``). Each call submits its collectives to
the core as numpy views and then waits for them: eagerly, at once; in a graph
(a ``tf.function`` or a ``tf.compat.v1`` graph), as two ops: a ``py_function``
that submits and returns at once, and a one-element ``tf.data`` pipeline whose
``py_function`` waits for the result.

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


def _wait_all(handles, wait):
    """``[wait(h) for h in handles]``, every handle waited for even after one fails,
    then the first failure raised: none is left in the core's table with its
    buffers held."""
    results, failure = [], None
    for h in handles:
        try:
            results.append(wait(h))
        except exceptions.FAILURES as e:
            results.append(None)
            failure = failure or e
    if failure is not None:
        raise failure
    return results


# Submitted in a graph and not collected yet, by key: (finish, handles, the
# inputs, kept referenced because the core reads their buffers).
_started = {}
_keys = itertools.count()
_basics.call_at_init(_started.clear)


def _release(key):
    """Drops what a run submitted under ``key`` and never collected (the run was
    cancelled between the two steps), synchronizing its collectives if they are
    done. One still in flight is left, to be released the next time."""
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
        arrays = [t.numpy() for t in tensors]
        handles, finish = start(*arrays)
        _started[key] = (finish, handles, (tensors, arrays))
        last.append(key)
        return np.int64(key)
    return begin


def _collect(key):
    entry = _started.pop(int(key), None)
    if entry is None:
        raise exceptions.HorovodInternalError(
            f"ringlet on rank {_ringlet.rank()}: a collective's result was released "
            f"before this run collected it: its op ran again in another run meanwhile")
    finish, _handles_, _inputs = entry
    return finish()


def run(start, inputs, out_dtypes, name=None):
    """Runs one call: ``start(*arrays)`` submits its collectives on the inputs' numpy
    values and returns (their handles, a function returning the outputs once they
    are done, as numpy values of ``out_dtypes``). Returns the list of outputs."""
    if tf.executing_eagerly():
        try:
            _, finish = start(*[_numpy(t) for t in inputs])
            outs = finish()
        except (ValueError,) + errors.RINGLET_ERRORS as e:
            raise _failure(e) from None
        return [tf.convert_to_tensor(o, dtype=d) for o, d in zip(outs, out_dtypes)]
    key = tf.py_function(_begin(start), list(inputs), tf.int64, name=name)
    collected = tf.data.Dataset.from_tensors(key).map(
        lambda k: tuple(tf.py_function(_collect, [k], list(out_dtypes))))
    return list(collected.get_single_element())


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
    return handles, lambda: _wait_all(handles, _handles.synchronize)


def allreduce(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    prepared = [_as_reduced(t) for t in tensors]
    # The core numbers groups in the order they are submitted, which only eager calls
    # keep the same on every rank; in a graph the members go alone, fused as they meet.
    as_group = tf.executing_eagerly()

    def start(*arrays):
        arrays = [_c_array(a) for a in arrays]
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
            _wait_all(handles, _ringlet.synchronize)
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
    def start(*arrays):
        return _registered([_np_ops._allgather_named(_c_array(a), n,
                                                     process_set_id)
                            for a, n in zip(arrays, names)])

    outs = run(start, tensors, [t.dtype for t in tensors])
    return [_with_rows_unknown(out, t) for out, t in zip(outs, tensors)]


def broadcast(tensors, root_rank, names, process_set_id):
    def start(*arrays):
        copies = [_c_array(np.array(a, copy=True, order="C")) for a in arrays]
        return _registered([_np_ops._broadcast_named(c, root_rank, n, process_set_id)
                            for c, n in zip(copies, names)])

    outs = run(start, tensors, [t.dtype for t in tensors])
    for out, t in zip(outs, tensors):
        if hasattr(out, "set_shape"):
            out.set_shape(t.shape)
    return outs


def reducescatter(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    prepared = [_as_reduced(t) for t in tensors]

    def start(*arrays):
        arrays = [_c_array(a) for a in arrays]
        handles = [_ringlet.reducescatter_async(n, a, core_op, float(prescale_factor),
                                                float(postscale_factor), process_set_id)
                   for a, n in zip(arrays, names)]

        def finish():
            results = _wait_all(handles, _ringlet.synchronize)
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
        rows = [int(v) for v in s]
        where = f"ringlet: alltoall of '{name}' on rank {_ringlet.rank()}"
        if any(v < 0 for v in rows):
            raise exceptions.InvalidArgumentError(f"{where}: splits hold a negative value "
                                                  f"({rows})")
        if rows and sum(rows) > x.shape[0]:
            raise exceptions.InvalidArgumentError(
                f"{where}: splits add up to {sum(rows)}, more than the first dimension "
                f"{x.shape[0]}")
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
