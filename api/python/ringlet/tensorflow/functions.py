"""Starting every rank from the same state, and moving Python objects."""

import tensorflow as tf

from ringlet import numpy as _np_ops
from ringlet.common import handles as _handles
from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.mpi_ops import _broadcast_raw


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns ``root_rank``'s values to ``variables`` on every rank (one collective for
    all of them; inside a ``tf.function`` too)."""
    variables = list(variables)
    if not variables:
        return tf.no_op() if not tf.executing_eagerly() else None
    # Numbered per call: two calls in one tf.function may run at once.
    base = _handles.op_name("broadcast_variables", None, process_set)
    names = [f"{base}.{i}" for i in range(len(variables))]
    values = _broadcast_raw([v.read_value() if hasattr(v, "read_value") else v
                             for v in variables], root_rank, names, process_set)
    assigns = [v.assign(value) for v, value in zip(variables, values)]
    return None if tf.executing_eagerly() else tf.group(*assigns)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """``root_rank``'s ``obj`` (anything picklable) on every member (eager)."""
    return _np_ops.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every member's ``obj`` (anything picklable), in rank order (eager)."""
    return _np_ops.allgather_object(obj, name, process_set)
