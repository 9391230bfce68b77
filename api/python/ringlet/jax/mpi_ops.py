"""The collectives on jax arrays, outside ``jax.jit`` and inside it.

Outside a trace a collective runs at once on the arrays' own memory
(arrays.py) and returns jax arrays. Inside one (``jax.jit``, ``lax.scan``,
...) it becomes a callback from the compiled program around the same call
(compiled_callback.py), which writes the program's own output buffers.

Names: unnamed collectives are numbered per process set when they are
called, as in ringlet.torch; inside a trace, when they are traced, so that
each run of a compiled function reuses the names its trace gave. Inside a
trace the result's shape must be known when tracing: an allgather there
expects every rank to pass as many rows as this one, an alltoall to receive
as many rows as it sends, and each says otherwise by name when it runs.
"""

import jax
import jax.numpy as jnp
import numpy as np

from ringlet import _ringlet
from ringlet.common import basics as _basics
from ringlet.common import handles as _handles
from ringlet.common.basics import Average
from ringlet.common.exceptions import InvalidArgumentError, MismatchError
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.jax import arrays as _arrays
from ringlet.jax import compiled_callback as _compiled
from ringlet.jax import pytrees as _pytrees

_op_name = _handles.op_name


def _traced(*trees):
    return any(isinstance(leaf, jax.core.Tracer)
               for tree in trees for leaf in jax.tree_util.tree_leaves(tree))


def _set_rank(process_set):
    return _ringlet.process_set_rank(_set_id(process_set))


def _set_size(process_set):
    return _ringlet.process_set_size(_set_id(process_set))


def _check_shape(call, full_name, shape, expected):
    """Inside a trace: the result's shape the collective gave against the one traced."""
    if tuple(shape) != tuple(expected):
        raise MismatchError(
            f"ringlet: {call} on rank {_ringlet.rank()}: tensor '{full_name}' gave "
            f"{tuple(shape)} where the jit-compiled program expects {tuple(expected)}: "
            f"{_EXPECTED_INSIDE_JIT[call]}")


_EXPECTED_INSIDE_JIT = {
    "allgather": "inside jax.jit every rank passes as many rows as this one "
                 "(call allgather outside jit for ranks that differ)",
    "alltoall": "inside jax.jit each rank receives as many rows as it sends "
                "(call alltoall outside jit for other splits)",
}


def _like(x):
    return jax.ShapeDtypeStruct(jnp.shape(x), x.dtype)


# ---------------------------------------------------------------- allreduce

def _allreduce_now(arrays, names, core_op, prescale_factor, postscale_factor, set_id,
                   outputs=None):
    """Reduces concrete arrays at once, each dtype's as one fused group (the core
    groups tensors of one dtype): into ``outputs`` (host arrays) where given, else
    into new jax arrays, returned."""
    for array, name in zip(arrays, names):
        _arrays.check_reducible(array.dtype, "allreduce", name)
    inputs = [_arrays.as_input(a, "allreduce", n) for a, n in zip(arrays, names)]
    results = [_arrays.output(a.dtype, a.shape) for a in arrays] if outputs is None \
        else outputs
    views = [_arrays.writable(o) for o in results]
    by_dtype = {}
    for index, array in enumerate(arrays):
        by_dtype.setdefault(jnp.dtype(array.dtype), []).append(index)
    handles = []
    for members in by_dtype.values():
        group = _ringlet.grouped_allreduce_async(
            [names[i] for i in members], [inputs[i] for i in members],
            [views[i] for i in members], core_op, float(prescale_factor),
            float(postscale_factor), set_id)
        for h, i in zip(group, members):
            handles.append(_handles.register(h, lambda data, shape, splits: None, inputs[i],
                                             views[i]))
    _handles.wait_all(handles, _handles.synchronize)
    return None if outputs is not None else [_arrays.to_jax(r) for r in results]


def _grouped_allreduce(tree, base, op, prescale_factor, postscale_factor, process_set):
    leaves, names, treedef = _pytrees.leaf_names(tree)
    if not leaves:
        return tree
    full_names = [f"{base}.{n}" for n in names]
    core_op = _basics.core_op(op)
    for leaf, name in zip(leaves, full_names):
        _arrays.check_reducible(leaf.dtype, "allreduce", name)
    set_id = _set_id(process_set)

    def run(concrete, outputs=None):
        _pytrees.check_same_tree("grouped_allreduce", base, names, concrete, process_set)
        return _allreduce_now(list(concrete), full_names, core_op, prescale_factor,
                              postscale_factor, set_id, outputs)

    if _traced(leaves):
        results = _compiled.call(lambda outputs, *c: run(c, outputs),
                                 [_like(x) for x in leaves], *leaves)
    else:
        results = run(leaves)
    return jax.tree_util.tree_unflatten(treedef, results)


def allreduce(tensor, average=None, name=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """The reduction (Average by default, or ``op``: Sum, Min, Max, Product) of
    ``tensor`` over the members of ``process_set``, as a new jax array.

    ``prescale_factor`` multiplies each rank's input first, ``postscale_factor`` the
    result, as Horovod does (an Average's division by the size joins the latter)."""
    op = _basics.resolve_op(op, average)
    full_name = _op_name("allreduce", name, process_set)
    array = tensor if isinstance(tensor, jax.Array) else jnp.asarray(tensor)
    _arrays.check_reducible(array.dtype, "allreduce", full_name)
    core_op = _basics.core_op(op)
    set_id = _set_id(process_set)

    def run(x, outputs=None):
        results = _allreduce_now([x], [full_name], core_op, prescale_factor,
                                 postscale_factor, set_id, outputs)
        return None if results is None else results[0]

    if _traced(array):
        return _compiled.call(lambda outputs, x: run(x, outputs), _like(array), array)
    return run(array)


def grouped_allreduce(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set):
    """Reduces every leaf of ``tensors`` (a list, or any pytree) as one fused
    collective; returns the same structure. Each leaf's tensor is named by its path
    (``<name>.params.dense.w``), and ranks that pass different pytrees fail with a
    MismatchError naming the first leaf that differs."""
    op = _basics.resolve_op(op, average)
    base = _handles.group_base(name, process_set)
    return _grouped_allreduce(tensors, base, op, prescale_factor, postscale_factor,
                              process_set)


# ---------------------------------------------------------------- allgather

def _allgather_bytes(array, full_name, set_id):
    """(the runtime's result bytes, its shape in rows of the input's trailing shape)."""
    dtype, trailing = jnp.dtype(array.dtype), tuple(array.shape[1:])
    source = (_arrays.as_input(array, "allgather", full_name) if _arrays.reducible(dtype)
              else _arrays.as_bytes(array, "allgather", full_name))
    handle = _ringlet.allgather_async(full_name, source, set_id)
    data, shape, _ = _handles.synchronize(
        _handles.register(handle, lambda *result: result, source))
    return data, (shape[0],) + trailing


def allgather(tensor, name=None, process_set=global_process_set):
    """``tensor`` from every member concatenated on axis 0 (outside jit the ranks'
    row counts may differ; inside it they must be this rank's)."""
    full_name = _op_name("allgather", name, process_set)
    array = tensor if isinstance(tensor, jax.Array) else jnp.asarray(tensor)
    if array.ndim == 0:
        raise InvalidArgumentError(
            f"allgather '{full_name}': a scalar has no axis 0 to concatenate on")
    set_id = _set_id(process_set)
    if _traced(array):
        expected = jax.ShapeDtypeStruct((array.shape[0] * _set_size(process_set),)
                                        + array.shape[1:], array.dtype)

        def fill(outputs, x):
            data, shape = _allgather_bytes(x, full_name, set_id)
            _check_shape("allgather", full_name, shape, expected.shape)
            _arrays.fill(outputs[0], data)

        return _compiled.call(fill, expected, array)
    data, shape = _allgather_bytes(array, full_name, set_id)
    return _arrays.from_bytes(data, array.dtype, shape)


# ---------------------------------------------------------------- broadcast

def _broadcast_now(array, root_rank, full_name, set_id, into=None):
    """The core broadcasts in place: every rank passes a buffer (``into`` where
    given, else a fresh one), the root's holding its array. Returns the new jax
    array, or None having written ``into``."""
    dtype, shape = jnp.dtype(array.dtype), tuple(array.shape)
    _arrays.check_bytes_movable(dtype, "broadcast", full_name)
    if isinstance(array, jax.Array):
        _arrays.on_cpu(array, "broadcast", full_name)
    raw = (_arrays.aligned_bytes(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
           if into is None else _arrays.bytes_of(into))
    if _ringlet.rank() == int(root_rank) and raw.size:
        raw[...] = _arrays.bytes_of(np.ascontiguousarray(np.asarray(array)))
    # Dtypes the core does not reduce move as bytes.
    buffer = _arrays.labelled(raw, dtype, shape) if _arrays.reducible(dtype) else raw
    handle = _ringlet.broadcast_async(full_name, buffer, int(root_rank), set_id)
    _handles.synchronize(_handles.register(handle, lambda *result: None, buffer))
    if into is not None:
        return None
    if _arrays.reducible(dtype):
        return _arrays.to_jax(raw.view(dtype).reshape(shape))
    return jnp.asarray(raw.view(dtype).reshape(shape))


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s ``tensor`` (a global rank) on every member, as a new jax array."""
    full_name = _op_name("broadcast", name, process_set)
    array = tensor if isinstance(tensor, jax.Array) else jnp.asarray(tensor)
    set_id = _set_id(process_set)
    if _traced(array):
        return _compiled.call(
            lambda outputs, x: _broadcast_now(x, root_rank, full_name, set_id, outputs[0]),
            _like(array), array)
    return _broadcast_now(array, root_rank, full_name, set_id)


def broadcast_parameters(params, root_rank=0, name=None, process_set=global_process_set):
    """``root_rank``'s pytree of arrays on every member: a new pytree of the same
    structure (JAX's arrays cannot be overwritten). Leaves are named by their paths;
    ranks that pass different pytrees fail with a MismatchError naming the leaf."""
    base = _handles.group_base(name or "broadcast_parameters", process_set)
    leaves, names, treedef = _pytrees.leaf_names(params)
    if not leaves:
        return params
    leaves = [x if isinstance(x, jax.Array) or _traced(x) else jnp.asarray(x) for x in leaves]
    set_id = _set_id(process_set)

    def run(concrete, outputs=None):
        _pytrees.check_same_tree("broadcast_parameters", base, names, concrete, process_set)
        return [_broadcast_now(x, root_rank, f"{base}.{n}", set_id,
                               None if outputs is None else outputs[i])
                for i, (x, n) in enumerate(zip(concrete, names))]

    if _traced(leaves):
        results = _compiled.call(lambda outputs, *c: run(c, outputs),
                                 [_like(x) for x in leaves], *leaves)
    else:
        results = run(leaves)
    return jax.tree_util.tree_unflatten(treedef, results)


# ---------------------------------------------------------------- alltoall

def _alltoall_bytes(array, splits, full_name, set_id):
    """(the runtime's result bytes, its shape, the rows received from each member)."""
    dtype, trailing = jnp.dtype(array.dtype), tuple(array.shape[1:])
    source = (_arrays.as_input(array, "alltoall", full_name) if _arrays.reducible(dtype)
              else _arrays.as_bytes(array, "alltoall", full_name))
    split_list = [] if splits is None else [int(s) for s in np.asarray(splits).reshape(-1)]
    handle = _ringlet.alltoall_async(full_name, source, split_list, set_id)
    data, shape, received = _handles.synchronize(
        _handles.register(handle, lambda *result: result, source))
    return data, (shape[0],) + trailing, np.asarray(received, dtype=np.int32)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Rows of ``tensor`` scattered to the members (``splits[i]`` rows to the i-th;
    even shares without ``splits``) and theirs gathered here in rank order. With
    ``splits`` given, returns (rows, the rows received from each member)."""
    full_name = _op_name("alltoall", name, process_set)
    array = tensor if isinstance(tensor, jax.Array) else jnp.asarray(tensor)
    if array.ndim == 0:
        raise InvalidArgumentError(f"alltoall '{full_name}': a scalar has no rows to scatter")
    set_id = _set_id(process_set)
    if _traced(array, splits):
        expected = (_like(array), jax.ShapeDtypeStruct((_set_size(process_set),), jnp.int32))

        def fill(outputs, x, s=None):
            data, shape, received = _alltoall_bytes(x, s, full_name, set_id)
            _check_shape("alltoall", full_name, shape, array.shape)
            _arrays.fill(outputs[0], data)
            np.asarray(outputs[1])[...] = received

        operands = (array,) if splits is None else (array, jnp.asarray(splits, jnp.int32))
        out, received = _compiled.call(fill, expected, *operands)
    else:
        data, shape, received = _alltoall_bytes(array, splits, full_name, set_id)
        out, received = _arrays.from_bytes(data, array.dtype, shape), jnp.asarray(received)
    return out if splits is None else (out, received)


# ---------------------------------------------------------------- reducescatter

def _share(rows, parts, index):
    """Horovod's even split (common/even_split.h): the first rows % parts get one more."""
    return rows // parts + (1 if index < rows % parts else 0)


def _reducescatter_bytes(array, full_name, core_op, prescale_factor, postscale_factor,
                         set_id):
    _arrays.check_reducible(array.dtype, "reducescatter", full_name)
    source = _arrays.as_input(array, "reducescatter", full_name)
    handle = _ringlet.reducescatter_async(full_name, source, core_op, float(prescale_factor),
                                          float(postscale_factor), set_id)
    data, shape, _ = _handles.synchronize(
        _handles.register(handle, lambda *result: result, source))
    return data, tuple(shape)


def reducescatter(tensor, name=None, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """This member's share of axis 0 of the reduction of ``tensor`` over the members
    (Horovod's even split: the first rows % size members hold one row more)."""
    full_name = _op_name("reducescatter", name, process_set)
    array = tensor if isinstance(tensor, jax.Array) else jnp.asarray(tensor)
    if array.ndim == 0:
        raise InvalidArgumentError(
            f"reducescatter '{full_name}': a scalar has no rows to scatter")
    _arrays.check_reducible(array.dtype, "reducescatter", full_name)
    core_op = _basics.core_op(op)
    set_id = _set_id(process_set)
    if _traced(array):
        rows = _share(array.shape[0], _set_size(process_set), _set_rank(process_set))

        def fill(outputs, x):
            data, _ = _reducescatter_bytes(x, full_name, core_op, prescale_factor,
                                           postscale_factor, set_id)
            _arrays.fill(outputs[0], data)

        return _compiled.call(fill, jax.ShapeDtypeStruct((rows,) + array.shape[1:],
                                                         array.dtype), array)
    data, shape = _reducescatter_bytes(array, full_name, core_op, prescale_factor,
                                       postscale_factor, set_id)
    return _arrays.from_bytes(data, array.dtype, shape)


# ---------------------------------------------------------------- the rest

def barrier(process_set=global_process_set):
    """Returns once every member of ``process_set`` called it."""
    _ringlet.barrier(_set_id(process_set))


def join():
    """This rank has no more data; returns the last rank to join."""
    return _ringlet.join()


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """``root_rank``'s ``obj`` (anything picklable) on every member."""
    from ringlet import numpy as ringlet_numpy
    return ringlet_numpy.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every member's ``obj`` (anything picklable), in rank order."""
    from ringlet import numpy as ringlet_numpy
    return ringlet_numpy.allgather_object(obj, name, process_set)
