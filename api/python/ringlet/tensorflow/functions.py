"""Starting every rank from the same state, and moving Python objects."""

import pickle

import numpy as np
import tensorflow as tf

from ringlet import _ringlet
from ringlet import numpy as _np_ops
from ringlet.common import handles as _handles
from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.mpi_ops import _broadcast_group, broadcast


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns ``root_rank``'s values to ``variables`` on every member, one collective
    for all of them: at once when eager; in a graph, the returned op does it.
    ``inplace`` is accepted (the values are assigned either way)."""
    variables = list(variables)
    if not variables:
        return None if tf.executing_eagerly() else tf.no_op()
    # Numbered per call: two calls in one graph may run at once.
    base = _handles.op_name("broadcast_variables", None, process_set)
    names = [f"{base}.{i}" for i in range(len(variables))]
    values = _broadcast_group([v.read_value() if hasattr(v, "read_value") else v
                               for v in variables], root_rank, names, process_set)
    assigns = [v.assign(value) for v, value in zip(variables, values)]
    return None if tf.executing_eagerly() else tf.group(*assigns)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """``root_rank``'s ``obj`` (anything picklable) on every member. It runs at once,
    in a graph too, so ``session`` is accepted and unused."""
    return _np_ops.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every member's ``obj`` (anything picklable), in rank order. It runs at once, in a
    graph too, so ``session`` is accepted and unused."""
    return _np_ops.allgather_object(obj, name, process_set)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """For ``tf.compat.v1`` graphs: builds the broadcast ops once and returns a
    function that sends ``root_rank``'s object (anything picklable) to every member
    through ``session`` (the default session when None) and returns it."""
    name = name or "broadcast_object_fn"
    size_in = tf.compat.v1.placeholder(tf.int32, [1], name="bcast_object_size")
    size_out = broadcast(size_in, root_rank, name + ".sz", process_set=process_set)
    data_in = tf.compat.v1.placeholder(tf.uint8, [None], name="bcast_object_data")
    data_out = broadcast(data_in, root_rank, name + ".t", process_set=process_set)

    def bcast(obj):
        sess = session or tf.compat.v1.get_default_session()
        if _ringlet.rank() == root_rank:
            data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
            sess.run(size_out, feed_dict={size_in: [data.size]})
            sess.run(data_out, feed_dict={data_in: data})
            return obj
        size = sess.run(size_out, feed_dict={size_in: [0]})
        data = sess.run(data_out, feed_dict={data_in: np.zeros(int(size[0]), np.uint8)})
        return pickle.loads(data.tobytes())
    return bcast
