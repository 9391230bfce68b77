"""The op library: ringlet.tensorflow's collectives as TensorFlow ops that run
asynchronously on the tensors' own buffers (host memory, or a GPU's where the
library has GPU kernels), ``join`` and the ``*_op`` queries
(api/python/tensorflow_ops/ringlet_tf_ops.cc). Their gradients are
registered in ringlet/tensorflow/gradients.py.

``library`` is None where this install has no op library (TensorFlow was not
importable when ringlet was built) or ``RINGLET_TENSORFLOW_OPS=0`` turns it
off; ringlet.tensorflow then runs the same calls through
ringlet/tensorflow/pyfunc.py, alike in results and, when eager, in errors.

Every function here has the same signature and meaning as its namesake in
pyfunc.py: lists of tensors in, lists out, names given whole.
"""

import functools
import os

import tensorflow as tf

from ringlet.tensorflow import errors


def _load():
    path = os.path.join(os.path.dirname(__file__), "_ringlet_tf_ops.so")
    if os.environ.get("RINGLET_TENSORFLOW_OPS", "1") == "0" or not os.path.exists(path):
        return None
    return tf.load_op_library(path)


library = _load()


@functools.cache
def has_xla_kernels():
    """True where allreduce and broadcast compile inside XLA (jit_compile=True)
    on the host: the op library was built with its XLA kernels
    (tensorflow_ops/xla_ops.cc, which export the handlers XLA calls)."""
    if library is None:
        return False
    import ctypes
    path = os.path.join(os.path.dirname(__file__), "_ringlet_tf_ops.so")
    try:  # loaded already by TensorFlow: this finds it, loading nothing
        handle = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False
    return hasattr(handle, "ringlet_xla_allreduce")


def _run(op, *args, **kwargs):
    """Calls an op; eagerly, its error becomes the exception the ``py_function`` path
    raises (inside a graph TensorFlow's own error reaches the caller)."""
    if not tf.executing_eagerly():
        return op(*args, **kwargs)
    try:
        return op(*args, **kwargs)
    except tf.errors.OpError as e:
        raise errors.from_op_error(e) from None


def allreduce(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    # The core numbers groups in the order they are submitted, which only eager calls
    # keep the same on every rank; in a graph the members go alone, fused as they meet.
    return _run(library.ringlet_allreduce, tensors, reduce_op=core_op,
                prescale_factor=float(prescale_factor), postscale_factor=float(postscale_factor),
                process_set_id=process_set_id, tensor_names=names,
                as_group=tf.executing_eagerly())


def allgather(tensors, names, process_set_id):
    return _run(library.ringlet_allgather, tensors, process_set_id=process_set_id,
                tensor_names=names)


def broadcast(tensors, root_rank, names, process_set_id):
    return [_run(library.ringlet_broadcast, t, root_rank=root_rank,
                 process_set_id=process_set_id, tensor_name=n)
            for t, n in zip(tensors, names)]


def reducescatter(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    return _run(library.ringlet_reducescatter, tensors, reduce_op=core_op,
                prescale_factor=float(prescale_factor), postscale_factor=float(postscale_factor),
                process_set_id=process_set_id, tensor_names=names)


def alltoall(tensor, splits, name, process_set_id):
    """(the gathered rows, the rows received from each member); ``splits`` is an
    int32 vector, empty for an even split."""
    return tuple(_run(library.ringlet_alltoall, tensor, splits, process_set_id=process_set_id,
                      tensor_name=name))


def join():
    return _run(library.ringlet_join)


_QUERIES = {
    "rank": "ringlet_rank",
    "local_rank": "ringlet_local_rank",
    "local_size": "ringlet_local_size",
    "cross_rank": "ringlet_cross_rank",
    "cross_size": "ringlet_cross_size",
    "size": "ringlet_size",
    "process_set_included": "ringlet_process_set_included",
}


def query(what, process_set_id=0, name=None):
    """An int32 scalar op: ``what`` (a key of _QUERIES) read when the op runs."""
    return _run(getattr(library, _QUERIES[what]), process_set_id=process_set_id, name=name)
