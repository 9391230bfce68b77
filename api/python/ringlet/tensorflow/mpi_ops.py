"""horovod.tensorflow's collectives on TensorFlow tensors: eager, inside
``tf.function`` and in ``tf.compat.v1`` graphs, where they run when the graph
runs (building a graph never runs a collective).

Each call goes through the op library's asynchronous ops (ops.py) where
there is one, else through ``py_function`` ops (pyfunc.py); the runtime's
negotiation matches collectives by name, in whatever order TensorFlow runs
them. Horovod's gradient rules (gradients.py) apply on both paths.

Names: a collective named ``n`` goes on the wire as ``<collective>.n``, with the
graph's name scope in front unless ``ignore_name_scope`` (as in Horovod, where
ops of one name in two scopes are two collectives). Unnamed ones are numbered
per process set when eager; in a graph they are named after their input
tensor (a group after its first and last), as Horovod names them, so that a
function one rank retraces keeps the names the others still run.
"""

import os
import re
import weakref

import tensorflow as tf

from ringlet import _ringlet
from ringlet.common.api import *  # noqa: F401,F403  (horovod.tensorflow.mpi_ops has them too)
from ringlet.common import basics as _basics
from ringlet.common import handles as _handles
from ringlet.common.basics import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.tensorflow import ops as _library
from ringlet.tensorflow import pyfunc as _pyfunc
from ringlet.tensorflow.compression import Compression

_impl = _library if _library.library is not None else _pyfunc

# What the core reduces: every dtype but these moves as bytes only.
_REDUCIBLE = {tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.uint8, tf.int16,
              tf.uint16, tf.int32, tf.int64}

handle_average_backwards_compatibility = _basics.resolve_op


def check_num_rank_power_of_2(num_rank):
    """True when ``num_rank`` is a power of two (Adasum's requirement in Horovod)."""
    return num_rank != 0 and (num_rank & (num_rank - 1)) == 0


def _check_reducible(dtype):
    if dtype not in _REDUCIBLE:
        raise ValueError(f"dtype {dtype.name} is not supported for reductions (float16, "
                         f"bfloat16, float32, float64, int8, uint8, int16, uint16, int32 and "
                         f"int64 are)")


def _check_movable(dtype, call):
    # Both paths refuse alike: the op library's kernels would, and numpy has no bytes of
    # a string tensor to send.
    if dtype in (tf.string, tf.resource, tf.variant):
        raise ValueError(f"ringlet: {call}: dtype {dtype.name} has no fixed element size, so "
                         f"it cannot be sent as bytes")


def _scoped(name, ignore_name_scope):
    """``name`` under the graph's name scope, as Horovod names a graph's ops."""
    if name is None or ignore_name_scope or tf.executing_eagerly():
        return name
    scope = tf.compat.v1.get_default_graph().get_name_scope()
    return f"{scope}/{name}" if scope else name


# The names unnamed collectives took in each graph being built (see _graph_name).
_taken = weakref.WeakKeyDictionary()


def _enclosing_graph():
    """The graph being built, or the one a branch or loop body being built belongs
    to: a branch's tensors are named as if the branch were a graph alone, so two
    branches of one graph may hold tensors of one name."""
    graph = tf.compat.v1.get_default_graph()
    while (getattr(graph, "outer_graph", None) is not None
           and any(k.__name__ == "ControlFlowFuncGraph" for k in type(graph).__mro__)):
        graph = graph.outer_graph
    return graph


def _graph_name(prefix, sources, ignore_name_scope):
    """An unnamed collective's name in a graph: ``<prefix>.noname.<n>`` where ``n`` is
    the first source's name (a group's: its first and last ones'), as TensorFlow
    spells op names, under the name scope. Every rank that builds the same graph
    gives the same names, whichever traces it has built before; a second
    collective of the same name in the graph gets ``.1``, ``.2``, ... after it, as
    TensorFlow makes the op names of a graph distinct."""
    def spelled(source):
        return re.sub(r"[^A-Za-z0-9_]", "_", source.name)
    derived = spelled(sources[0])
    if len(sources) > 1:
        derived += "_" + spelled(sources[-1])
    base = f"{prefix}.{_scoped('noname.' + derived, ignore_name_scope)}"
    taken = _taken.setdefault(_enclosing_graph(), set())
    name, repeat = base, 0
    while name in taken:
        repeat += 1
        name = f"{base}.{repeat}"
    taken.add(name)
    return name


def _names(prefix, name, sources, process_set, ignore_name_scope=False):
    """The wire names of the collectives one call makes of ``sources`` (tensors or
    variables): ``<prefix>.<name>`` for one, ``<prefix>.<name>.<i>`` for a group.
    Unnamed, they are numbered when eager and named after the sources in a graph."""
    if name is None and not tf.executing_eagerly():
        base = _graph_name(prefix, sources, ignore_name_scope)
    else:
        base = _handles.op_name(prefix, _scoped(name, ignore_name_scope), process_set)
    return [base] if len(sources) == 1 else [f"{base}.{i}" for i in range(len(sources))]


def _differentiable(forward, grad, tensors):
    """``forward(tensors)`` (a list of outputs), differentiable on the ``py_function``
    path through ``grad(tensors, outputs, output_grads)``; the op library's ops carry
    the same rule as a registered gradient."""
    if _impl is _library or not all(t.dtype.is_floating or t.dtype.is_complex for t in tensors):
        return forward(tensors)

    @tf.custom_gradient
    def run(*xs):
        outs = forward(list(xs))

        def backward(*dys):
            return grad(list(xs), outs, list(dys))
        return outs, backward
    return list(run(*tensors))


def _matching(grads, outputs):
    """The incoming gradients in the outputs' dtypes, zeros where none came
    (TensorFlow may hand a float32 zero gradient to a float64 output nobody used)."""
    return [tf.zeros_like(o) if g is None else g if g.dtype == o.dtype else tf.cast(g, o.dtype)
            for g, o in zip(grads, outputs)]


# -------------------------------------------------------------------- allreduce

def _grouped_reduction(kind, tensors, name, op, prescale_factor, postscale_factor,
                       ignore_name_scope, process_set, run, grads):
    """A group of reductions as ops of one dtype each: ``run(xs, names, core_op, pre,
    post, set_id)`` reduces, ``grads(dys, op, pre, post, set_id)`` is the gradient."""
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    core_op = _basics.core_op(op)
    for t in tensors:
        _check_reducible(t.dtype)
    names = _names(f"grouped_{kind}" if len(tensors) > 1 else kind, name, tensors,
                   process_set, ignore_name_scope)
    set_id = _set_id(process_set)
    outs = [None] * len(tensors)
    # The library's op takes one dtype; a mixed group is one op per dtype.
    for members in _pyfunc._by_dtype(tensors):
        def forward(xs, members=members):
            return run(xs, [names[i] for i in members], core_op, prescale_factor,
                       postscale_factor, set_id)

        def grad(xs, ys, dys):
            return grads(_matching(dys, ys), op, prescale_factor, postscale_factor, set_id)
        for i, out in zip(members, _differentiable(forward, grad, [tensors[i] for i in members])):
            outs[i] = out
    return outs


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                       ignore_name_scope=False, process_set=global_process_set):
    """The reduction of each tensor over the set, one fused group (Sum by default, as
    Horovod's op); differentiable: the gradient is the same reduction of the
    incoming gradients."""
    return _grouped_reduction("allreduce", tensors, name, op, prescale_factor,
                              postscale_factor, ignore_name_scope, process_set,
                              _impl.allreduce, _gradients.allreduce_grads)


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set=global_process_set):
    """Horovod's allreduce op: the reduction (Sum by default) of a dense tensor over
    the set, without compression; differentiable."""
    return _grouped_allreduce([tensor], name, op, prescale_factor, postscale_factor,
                              ignore_name_scope, process_set)[0]


def _check_sparse(op, prescale_factor, postscale_factor):
    """Horovod's refusals for tf.IndexedSlices, before any collective runs."""
    if op == Adasum:
        raise NotImplementedError("The Adasum reduction does not support sparse tensors; "
                                  "pass sparse_as_dense=True to reduce them as dense ones")
    if op not in (Sum, Average):
        raise NotImplementedError("Only Sum and Average ops are supported with "
                                  "tf.IndexedSlices")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with "
                                  "tf.IndexedSlices")


def _elastic_job():
    """Whether this process is a worker of an elastic job (HOROVOD_ELASTIC,
    which the elastic driver sets), as Horovod asks."""
    try:
        return int(os.environ.get("HOROVOD_ELASTIC") or 0) != 0
    except ValueError:
        return False


def _size_of(process_set, dtype):
    """The set's size as a ``dtype`` scalar. In an elastic job it is read by
    ``size_op`` when the graph runs, as Horovod reads it there: a function
    traced in one round may run in a later one of another size. Elsewhere it
    is read now, once, as Horovod does."""
    if _elastic_job():
        return tf.cast(size_op(process_set_id=_set_id(process_set)), dtype)
    return tf.cast(_ringlet.process_set_size(_set_id(process_set)), dtype)


def _reduce_sparse(slices_list, op, process_set, ignore_name_scope):
    """IndexedSlices differ in their indices per rank: their values and indices are
    gathered whole (summed as a scatter would sum them), divided by the set's size
    for Average."""
    values = grouped_allgather([s.values for s in slices_list], process_set=process_set,
                               ignore_name_scope=ignore_name_scope)
    indices = grouped_allgather([s.indices for s in slices_list], process_set=process_set,
                                ignore_name_scope=ignore_name_scope)
    return [tf.IndexedSlices(v / _size_of(process_set, v.dtype) if op == Average else v, i,
                             dense_shape=s.dense_shape)
            for v, i, s in zip(values, indices, slices_list)]


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """The reduction (Average by default) of ``tensor`` over the ranks of the set.

    ``tf.IndexedSlices`` are gathered whole (values and indices) and summed or
    averaged, as an IndexedSlices; other ops and scales raise NotImplementedError.
    Differentiable. As in Horovod, the collective's ops are placed on
    ``device_dense`` (``device_sparse`` for IndexedSlices) where one is named, and
    by TensorFlow's placement otherwise: on a GPU they run on its memory.
    """
    op = _basics.resolve_op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        _check_sparse(op, prescale_factor, postscale_factor)
        with tf.device(device_sparse):
            return _reduce_sparse([tensor], op, process_set, ignore_name_scope)[0]
    _basics.core_op(op)  # refuses Adasum and unknown ops before anything runs
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
        reduced = _allreduce(compressed, name, op, prescale_factor, postscale_factor,
                             ignore_name_scope, process_set)
        return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """The reductions of a list of tensors (and IndexedSlices) as one fused group;
    the list in the same order."""
    if not tensors:
        return tensors
    op = _basics.resolve_op(op, average)
    sparse = [i for i, t in enumerate(tensors) if isinstance(t, tf.IndexedSlices)]
    dense = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    out = list(tensors)
    if sparse:
        _check_sparse(op, prescale_factor, postscale_factor)
    else:
        _basics.core_op(op)
    if dense:
        with tf.device(device_dense):
            pairs = [compression.compress(tf.convert_to_tensor(tensors[i])) for i in dense]
            reduced = _grouped_allreduce([c for c, _ in pairs], name, op, prescale_factor,
                                         postscale_factor, ignore_name_scope, process_set)
            for i, r, (_, ctx) in zip(dense, reduced, pairs):
                out[i] = compression.decompress(r, ctx)
    if sparse:
        with tf.device(device_sparse):
            for i, r in zip(sparse, _reduce_sparse([tensors[i] for i in sparse], op,
                                                    process_set, ignore_name_scope)):
                out[i] = r
    return out


# -------------------------------------------------------------------- allgather

def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """Each tensor from every member concatenated on dimension 0 (members may differ in
    it), as one op; differentiable: each gradient is this rank's rows of the average
    of the incoming gradients."""
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    for t in tensors:
        _check_movable(t.dtype, "allgather")
    names = _names("grouped_allgather" if len(tensors) > 1 else "allgather", name,
                   tensors, process_set, ignore_name_scope)
    set_id = _set_id(process_set)
    outs = [None] * len(tensors)
    for members in _pyfunc._by_dtype(tensors):
        def forward(xs, members=members):
            return _impl.allgather(xs, [names[i] for i in members], set_id)

        def grad(xs, ys, dys):
            return _gradients.allgather_grads(xs, _matching(dys, ys), set_id)
        for i, out in zip(members, _differentiable(forward, grad, [tensors[i] for i in members])):
            outs[i] = out
    return outs


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """``tensor`` from every member concatenated on dimension 0, in rank order
    (differentiable)."""
    return grouped_allgather([tensor], name, ignore_name_scope, process_set)[0]


# -------------------------------------------------------------------- broadcast

def _broadcast_group(tensors, root_rank, names, process_set):
    """Broadcasts of several tensors from ``root_rank`` under names given whole
    (differentiable)."""
    set_id = _set_id(process_set)
    for t in tensors:
        _check_movable(t.dtype, "broadcast")

    def forward(xs):
        return _impl.broadcast(xs, root_rank, names, set_id)

    def grad(xs, ys, dys):
        return [_gradients.broadcast_grad(dy, root_rank, set_id) for dy in _matching(dys, ys)]
    return _differentiable(forward, grad, tensors)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """``root_rank``'s ``tensor`` on every member (differentiable: the gradient is the
    average of the incoming gradients at the root, zero elsewhere)."""
    tensor = tf.convert_to_tensor(tensor)
    return _broadcast_group([tensor], root_rank,
                            _names("broadcast", name, [tensor], process_set, ignore_name_scope),
                            process_set)[0]


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Overwrites each variable with ``root_rank``'s value, as one op; returns their
    values after it (in a graph: tensors that read them once it has run)."""
    variables = list(variables)
    if not variables:
        return []
    names = _names("broadcast_", name, variables, process_set)
    values = _broadcast_group([v.read_value() for v in variables], root_rank, names,
                              process_set)
    assigns = [v.assign(value) for v, value in zip(variables, values)]
    if tf.executing_eagerly():
        return [v.read_value() for v in variables]
    with tf.control_dependencies(assigns):
        return [tf.identity(v.read_value()) for v in variables]


# -------------------------------------------------------------------- alltoall

def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends ``splits[i]`` rows of ``tensor`` to the i-th member (an even split when
    None) and gathers the rows sent here, in rank order. Returns the gathered
    tensor and, when ``splits`` is given, also the rows received from each member
    (int32). Splits may be int32 or int64 and may leave the last rows unsent; more
    rows than ``tensor`` has raise InvalidArgumentError when the op runs.
    Differentiable: the gradient sends the incoming gradient's rows back."""
    tensor = tf.convert_to_tensor(tensor)
    _check_movable(tensor.dtype, "alltoall")
    split_tensor = (tf.zeros([0], tf.int32) if splits is None
                    else tf.cast(tf.convert_to_tensor(splits), tf.int32))
    (full_name,) = _names("alltoall", name, [tensor], process_set, ignore_name_scope)
    set_id = _set_id(process_set)

    def forward(xs):
        return list(_impl.alltoall(xs[0], split_tensor, full_name, set_id))

    def grad(xs, ys, dys):
        return [_gradients.alltoall_grad(xs[0], _matching(dys[:1], ys[:1])[0], ys[1], set_id)]
    out, received = _differentiable(forward, grad, [tensor])
    return (out, received) if splits is not None else out


# ---------------------------------------------------------------- reducescatter

def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False,
                           process_set=global_process_set, prescale_factor=1.0,
                           postscale_factor=1.0):
    """This member's rows of each tensor's reduction (Sum by default, as Horovod's
    op), as one op; differentiable (Horovod's rule: the incoming gradients, scaled by
    the set's size for Sum and by the scales, gathered from every member)."""
    return _grouped_reduction("reducescatter", tensors, name, op, prescale_factor,
                              postscale_factor, ignore_name_scope, process_set,
                              _impl.reducescatter, _gradients.reducescatter_grads)


def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False,
                   process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Horovod's reducescatter op: this member's rows of the reduction (Sum by
    default), without compression; differentiable."""
    return _grouped_reducescatter([tensor], name, op, ignore_name_scope, process_set,
                                  prescale_factor, postscale_factor)[0]


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """This member's share of dimension 0 of the reduction of ``tensor`` over the set
    (the first ``d0 % members`` members get one row more); on ``device_dense`` where
    one is named."""
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
        reduced = _reducescatter(compressed, name, op, ignore_name_scope, process_set,
                                 prescale_factor, postscale_factor)
        return compression.decompress(reduced, ctx)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of a list of tensors as one op; the list of shares."""
    if not tensors:
        return tensors
    with tf.device(device_dense):
        pairs = [compression.compress(tf.convert_to_tensor(t)) for t in tensors]
        reduced = _grouped_reducescatter([c for c, _ in pairs], None, op, False, process_set,
                                         prescale_factor, postscale_factor)
        return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, pairs)]


# ------------------------------------------------------- join, barrier, queries

def join():
    """This rank has no more data; waits until every rank has joined (the others'
    allreduces go on with this rank contributing zeros) and returns the last rank
    to join, as an int32 scalar tensor (in a graph: when the op runs)."""
    return _impl.join()


def barrier(process_set=global_process_set):
    """Returns once every member of the set has called it. It runs at once, as
    ``broadcast_object`` does: eagerly, and in ``tf.compat.v1`` code between
    session runs; inside a ``tf.function`` (or a branch or loop body of one being
    built) it raises RuntimeError, since it would run once while tracing and
    never when the function runs."""
    if tf.inside_function():
        raise RuntimeError(
            "hvd.barrier() cannot be used inside a tf.function: it runs at once, so "
            "it would wait for the other ranks while the function is traced and "
            "never when it runs; call it outside the function")
    _ringlet.barrier(_set_id(process_set))


def size_op(process_set_id=0, name=None):
    """The members of the process set (the world by default), read when the op runs:
    an int32 scalar; -3 for a set unknown here."""
    return _impl.query("size", process_set_id, name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this rank is a member of the process set, else 0 (-3 for a set unknown
    here), read when the op runs."""
    return _impl.query("process_set_included", process_set_id, name)


def rank_op(name=None):
    """This process's rank, read when the op runs (an int32 scalar)."""
    return _impl.query("rank", name=name)


def local_rank_op(name=None):
    """This process's rank on its host, read when the op runs."""
    return _impl.query("local_rank", name=name)


def local_size_op(name=None):
    """The ranks on this host, read when the op runs."""
    return _impl.query("local_size", name=name)


def cross_rank_op(name=None):
    """This host's index among the hosts, read when the op runs."""
    return _impl.query("cross_rank", name=name)


def cross_size_op(name=None):
    """The hosts of the job, read when the op runs."""
    return _impl.query("cross_size", name=name)


for _query_op in ("RingletRank", "RingletLocalRank", "RingletLocalSize", "RingletCrossRank",
                  "RingletCrossSize", "RingletSize", "RingletProcessSetIncluded",
                  "RingletJoin"):
    tf.no_gradient(_query_op)

from ringlet.tensorflow import gradients as _gradients  # noqa: E402  (uses the names above)
