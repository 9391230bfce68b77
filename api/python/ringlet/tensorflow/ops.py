"""The op library: ringlet.tensorflow's allreduce, grouped allreduce,
allgather and broadcast as TensorFlow ops that run asynchronously on the
tensors' own buffers (api/python/tensorflow_ops/ringlet_tf_ops.cc), with
Horovod's gradient rules registered for them.

``library`` is None where this install has no op library (TensorFlow was not
importable when ringlet was built) or ``RINGLET_TENSORFLOW_OPS=0`` turns it
off; ringlet.tensorflow then runs the same collectives as ``py_function``
ops, slower but alike in results and errors.
"""

import os

import tensorflow as tf

from ringlet import _ringlet
from ringlet.common import basics, exceptions
from ringlet.common import handles as _handles


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


# Horovod's gradient rules. A gradient's collective is unnamed: it is numbered
# like any other, and every rank builds the same backward pass.
if library is not None:
    @tf.RegisterGradient("RingletAllreduce")
    def _allreduce_grad(op, *grads):
        set_id = op.get_attr("process_set_id")
        base = _handles.group_base(None, set_id)
        return allreduce(list(grads), [f"{base}.{i}" for i in range(len(grads))],
                         op.get_attr("reduce_op"), op.get_attr("prescale_factor"),
                         op.get_attr("postscale_factor"), set_id)

    @tf.RegisterGradient("RingletAllgather")
    def _allgather_grad(op, grad):
        # This rank's rows of the summed gradient.
        set_id = op.get_attr("process_set_id")
        (reduced,) = allreduce([grad], [_handles.op_name("allreduce", None, set_id)],
                               basics.core_op(basics.Sum), 1.0, 1.0, set_id)
        x = op.inputs[0]
        rows = allgather(tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1]),
                         _handles.op_name("allgather", None, set_id), set_id)
        offset = tf.reduce_sum(rows[:_ringlet.process_set_rank(set_id)])
        begin = tf.concat([[offset], tf.zeros_like(tf.shape(reduced, out_type=tf.int64)[1:])], 0)
        return tf.slice(reduced, begin, tf.shape(x, out_type=tf.int64))

    @tf.RegisterGradient("RingletBroadcast")
    def _broadcast_grad(op, grad):
        # The sum of the gradients at the root, zero elsewhere.
        set_id = op.get_attr("process_set_id")
        (reduced,) = allreduce([grad], [_handles.op_name("allreduce", None, set_id)],
                               basics.core_op(basics.Sum), 1.0, 1.0, set_id)
        if _ringlet.rank() != op.get_attr("root_rank"):
            return tf.zeros_like(reduced)
        return reduced
