"""Starting every rank from the same state, and moving Python objects
(pickled with cloudpickle, as Horovod's, so lambdas and local classes cross
too)."""

import pickle

import numpy as np
import tensorflow as tf

from ringlet import _ringlet
from ringlet import numpy as _np_ops
from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.mpi_ops import _broadcast_group, _names, broadcast

try:
    import cloudpickle as _pickler
except ImportError:  # a declared dependency; plain pickle moves what it can
    _pickler = pickle


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns ``root_rank``'s values to ``variables`` on every member, one collective
    for all of them: at once when eager; in a graph, the returned op does it.
    ``inplace`` is accepted (the values are assigned either way)."""
    variables = list(variables)
    if not variables:
        return None if tf.executing_eagerly() else tf.no_op()
    # Unnamed: numbered per call when eager, named after the variables in a graph
    # (two calls in one graph may run at once).
    names = _names("broadcast_variables", None, variables, process_set)
    values = _broadcast_group([v.read_value() if hasattr(v, "read_value") else v
                               for v in variables], root_rank, names, process_set)
    assigns = [v.assign(value) for v, value in zip(variables, values)]
    return None if tf.executing_eagerly() else tf.group(*assigns)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """``root_rank``'s ``obj`` (anything cloudpickle takes) on every member; the root
    gets ``obj`` itself. It runs at once, in a graph too, so ``session`` is accepted
    and unused."""
    root = _ringlet.rank() == root_rank
    sent = _np_ops.broadcast_object(_pickler.dumps(obj) if root else None, root_rank, name,
                                    process_set)
    return obj if root else pickle.loads(sent)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every member's ``obj`` (anything cloudpickle takes), in rank order, each
    unpickled here. It runs at once, in a graph too, so ``session`` is accepted
    and unused."""
    return [pickle.loads(data)
            for data in _np_ops.allgather_object(_pickler.dumps(obj), name, process_set)]


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """For ``tf.compat.v1`` graphs: builds the broadcast ops once and returns a
    function that sends ``root_rank``'s object (anything cloudpickle takes) to every
    member through ``session`` (the default session when this is called, as in
    Horovod) and returns it."""
    name = name or "broadcast_object_fn"
    size_in = tf.compat.v1.placeholder(tf.int32, [1], name="bcast_object_size")
    size_out = broadcast(size_in, root_rank, name + ".sz", process_set=process_set)
    data_in = tf.compat.v1.placeholder(tf.uint8, [None], name="bcast_object_data")
    data_out = broadcast(data_in, root_rank, name + ".t", process_set=process_set)
    session = session or tf.compat.v1.get_default_session()

    def bcast(obj):
        if session is None:
            raise ValueError("broadcast_object_fn() was given no session and was created "
                             "outside a default session: pass session=")
        if _ringlet.rank() == root_rank:
            data = np.frombuffer(_pickler.dumps(obj), dtype=np.uint8)
            session.run(size_out, feed_dict={size_in: [data.size]})
            session.run(data_out, feed_dict={data_in: data})
            return obj
        size = session.run(size_out, feed_dict={size_in: [0]})
        data = session.run(data_out, feed_dict={data_in: np.zeros(int(size[0]), np.uint8)})
        return pickle.loads(data.tobytes())
    return bcast
