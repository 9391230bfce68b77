"""The op library: ringlet.tensorflow's allreduce, grouped allreduce,
allgather and broadcast as TensorFlow ops that run asynchronously on the
tensors' own buffers (api/python/tensorflow_ops/ringlet_tf_ops.cc). Their
gradients are registered in ringlet/tensorflow/mpi_ops.py, beside the same
rules for the ``py_function`` path.

``library`` is None where this install has no op library (TensorFlow was not
importable when ringlet was built) or ``RINGLET_TENSORFLOW_OPS=0`` turns it
off; ringlet.tensorflow then runs the same collectives as ``py_function``
ops, slower but alike in results and errors.
"""

import os

import tensorflow as tf

from ringlet.common import exceptions


def _load():
    path = os.path.join(os.path.dirname(__file__), "_ringlet_tf_ops.so")
    if os.environ.get("RINGLET_TENSORFLOW_OPS", "1") == "0" or not os.path.exists(path):
        return None
    return tf.load_op_library(path)


library = _load()

# The kernels' status codes (status_of in ringlet_tf_ops.cc), read backwards.
_EXCEPTION_OF_STATUS = {
    tf.errors.InvalidArgumentError: exceptions.InvalidArgumentError,
    tf.errors.FailedPreconditionError: exceptions.NotInitializedError,
    tf.errors.UnknownError: exceptions.ConfigError,
    tf.errors.UnavailableError: exceptions.PeerLostError,
    tf.errors.DeadlineExceededError: exceptions.CollectiveTimeoutError,
    tf.errors.DataLossError: exceptions.MismatchError,
    tf.errors.AbortedError: exceptions.AbortedError,
    tf.errors.InternalError: exceptions.HorovodInternalError,
}


def run_eagerly_or_traced(op, *args, **kwargs):
    """Calls an op; eagerly, its error becomes the exception the other frameworks
    raise (inside a ``tf.function`` TensorFlow's own error reaches the caller)."""
    if not tf.executing_eagerly():
        return op(*args, **kwargs)
    try:
        return op(*args, **kwargs)
    except tf.errors.OpError as e:
        raise _EXCEPTION_OF_STATUS.get(type(e), exceptions.HorovodInternalError)(
            e.message) from None


def allreduce(tensors, names, core_op, prescale_factor, postscale_factor, process_set_id):
    return run_eagerly_or_traced(
        library.ringlet_allreduce, tensors, reduce_op=core_op,
        prescale_factor=float(prescale_factor), postscale_factor=float(postscale_factor),
        process_set_id=process_set_id, tensor_names=names)


def allgather(tensor, name, process_set_id):
    return run_eagerly_or_traced(library.ringlet_allgather, tensor,
                                 process_set_id=process_set_id, tensor_name=name)


def broadcast(tensor, root_rank, name, process_set_id):
    return run_eagerly_or_traced(library.ringlet_broadcast, tensor, root_rank=root_rank,
                                 process_set_id=process_set_id, tensor_name=name)
