"""Horovod's gradient rules for ringlet.tensorflow's collectives, written once:
the ``py_function`` path applies them through ``tf.custom_gradient``
(mpi_ops.py), the op library's ops through ``tf.RegisterGradient`` below.

A gradient's collectives are unnamed, as any other: numbered when eager and
named after the incoming gradients in a graph, the same on every rank, since
every rank builds (or, eagerly, runs) the same backward pass. In a graph they
run when the graph runs.
"""

import tensorflow as tf

from ringlet import _ringlet
from ringlet.common import basics
from ringlet.common.basics import Average, Max, Min, Product, Sum
from ringlet.tensorflow import mpi_ops
from ringlet.tensorflow import ops as _library


def allreduce_grads(grads, op, prescale_factor, postscale_factor, set_id):
    """allreduce's (a group's alike): the same reduction of the incoming gradients,
    scales included."""
    return mpi_ops._grouped_allreduce(grads, op=op, prescale_factor=prescale_factor,
                                      postscale_factor=postscale_factor, process_set=set_id)


def allgather_grads(inputs, grads, set_id):
    """allgather's: this rank's rows of the average of the incoming gradients over
    the set (each input's rows start after those of the members before it)."""
    averaged = mpi_ops._grouped_allreduce(grads, op=Average, process_set=set_id)
    rows = mpi_ops.grouped_allgather([tf.reshape(tf.shape(x)[0], [1]) for x in inputs],
                                     process_set=set_id)
    me = _ringlet.process_set_rank(set_id)
    mine = []
    for x, g, r in zip(inputs, averaged, rows):
        begin = tf.reduce_sum(r[:me])
        part = g[begin:begin + tf.shape(x)[0]]
        if not tf.executing_eagerly():
            part.set_shape(x.shape)
        mine.append(part)
    return mine


def broadcast_grad(grad, root_rank, set_id):
    """broadcast's: the average of the incoming gradients over the set at the root,
    zero elsewhere (multiplied by zero, so that every rank still runs the average)."""
    averaged = mpi_ops._allreduce(grad, op=Average, process_set=set_id)
    return averaged if _ringlet.rank() == root_rank else averaged * 0


def reducescatter_grads(grads, op, prescale_factor, postscale_factor, set_id):
    """reducescatter's: the incoming gradients, times the set's size for Sum and times
    the scales, gathered from every member."""
    members = _ringlet.process_set_size(set_id)
    scaled = []
    for g in grads:
        if op == Sum:
            g = g * members
        if prescale_factor != 1.0:
            g = g * prescale_factor
        if postscale_factor != 1.0:
            g = g * postscale_factor
        scaled.append(g)
    return mpi_ops.grouped_allgather(scaled, process_set=set_id)


def alltoall_grad(tensor, grad, received_splits, set_id):
    """alltoall's: the incoming gradient's rows sent back where they came from; rows
    of ``tensor`` past its splits, never sent, get zeros."""
    sent_back = mpi_ops.alltoall(grad, splits=received_splits, process_set=set_id)[0]
    unsent = tf.concat([tf.shape(tensor)[:1] - tf.shape(sent_back)[:1], tf.shape(tensor)[1:]], 0)
    return tf.concat([sent_back, tf.zeros(unsent, sent_back.dtype)], 0)


if _library.library is not None:
    # The library's ops carry the core's reduction op; the rules take Horovod's.
    _HOROVOD_OP = {basics.core_op(o): o for o in (Average, Sum, Min, Max, Product)}

    @tf.RegisterGradient("RingletAllreduce")
    def _allreduce_op_grad(op, *grads):
        return allreduce_grads(mpi_ops._matching(grads, op.outputs),
                               _HOROVOD_OP[op.get_attr("reduce_op")],
                               op.get_attr("prescale_factor"), op.get_attr("postscale_factor"),
                               op.get_attr("process_set_id"))

    @tf.RegisterGradient("RingletAllgather")
    def _allgather_op_grad(op, *grads):
        return allgather_grads(list(op.inputs), mpi_ops._matching(grads, op.outputs),
                               op.get_attr("process_set_id"))

    @tf.RegisterGradient("RingletBroadcast")
    def _broadcast_op_grad(op, grad):
        return broadcast_grad(mpi_ops._matching([grad], op.outputs)[0], op.get_attr("root_rank"),
                              op.get_attr("process_set_id"))

    @tf.RegisterGradient("RingletReducescatter")
    def _reducescatter_op_grad(op, *grads):
        return reducescatter_grads(mpi_ops._matching(grads, op.outputs),
                                   _HOROVOD_OP[op.get_attr("reduce_op")],
                                   op.get_attr("prescale_factor"),
                                   op.get_attr("postscale_factor"),
                                   op.get_attr("process_set_id"))

    @tf.RegisterGradient("RingletAlltoall")
    def _alltoall_op_grad(op, grad, _received_splits_grad):
        return [alltoall_grad(op.inputs[0], mpi_ops._matching([grad], op.outputs[:1])[0],
                              op.outputs[1], op.get_attr("process_set_id")), None]
