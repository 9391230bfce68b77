"""TensorFlow 1 style training through ``tf.compat.v1``, as Horovod's documents
show it: a ``tf.compat.v1.train`` optimizer wrapped by DistributedOptimizer,
``broadcast_global_variables`` and ``BroadcastGlobalVariablesHook`` for
``MonitoredTrainingSession``."""

import tensorflow as tf

from ringlet import _ringlet
from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.compression import Compression
from ringlet.tensorflow.functions import broadcast_variables
from ringlet.tensorflow.gradient_aggregation import LocalGradientAggregationHelper
from ringlet.tensorflow.gradient_tape import GradientReduction, reduce_shared
from ringlet.tensorflow.mpi_ops import Average


def broadcast_global_variables(root_rank):
    """An op that assigns ``root_rank``'s values to every global variable of the graph
    on every rank (graphs only: eager code broadcasts its variables with
    broadcast_variables)."""
    if tf.executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution. Please use "
            "`hvd.broadcast_variables(<model/optimizer variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A SessionRunHook that, once the session is created, assigns ``root_rank``'s
    values to every global variable on every rank (so that all start from the same
    initialization or checkpoint)."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None
        self.device = device

    def begin(self):
        if self.bcast_op is None or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)


class _DistributedOptimizer(tf.compat.v1.train.Optimizer):
    """A ``tf.compat.v1.train.Optimizer`` whose compute_gradients() returns the
    gradients reduced over the ranks; apply_gradients() and the slots are the
    wrapped optimizer's."""

    def __init__(self, optimizer, name=None, use_locking=False, device_dense="",
                 device_sparse="", compression=Compression.none, sparse_as_dense=False,
                 op=Average, gradient_predivide_factor=1.0, backward_passes_per_step=1,
                 average_aggregated_gradients=False, groups=None,
                 process_set=global_process_set, scale_local_gradients=True):
        if name is None:
            name = f"Distributed{type(optimizer).__name__}"
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer
        self._reduction = GradientReduction(compression, sparse_as_dense, op,
                                            gradient_predivide_factor, process_set, groups,
                                            device_dense, device_sparse)
        self._local_vars = set()
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._agg_helper = None
        if backward_passes_per_step > 1:
            if tf.executing_eagerly():
                raise ValueError("backward_passes_per_step > 1 is not yet supported for "
                                 "_LegacyOptimizer with eager execution.")
            self._agg_helper = LocalGradientAggregationHelper(
                backward_passes_per_step, self._reduce, sparse_as_dense,
                average_aggregated_gradients, _ringlet.rank(),
                LocalGradientAggregationHelper._OPTIMIZER_TYPE_LEGACY, process_set,
                scale_local_gradients, name)

    def _reduce(self, grads, variables):
        return self._reduction(grads, self.get_name(), variables)

    def register_local_var(self, var):
        """Marks ``var`` as this rank's own: its gradient is not reduced (and is
        divided by the set's size when scale_local_gradients)."""
        if self._agg_helper is not None:
            self._agg_helper.register_local_var(var)
        else:
            self._local_vars.add(var.ref())

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's (gradient, variable) pairs, each gradient reduced
        over the ranks (every backward_passes_per_step-th call, with aggregation)."""
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        grads, variables = [g for g, _ in pairs], [v for _, v in pairs]
        if self._agg_helper is not None:
            reduced = self._agg_helper.compute_gradients(grads, variables)
        else:
            reduced = reduce_shared(self._reduction, grads, variables, self._local_vars,
                                    self.scale_local_gradients, self.get_name())
        return list(zip(reduced, variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The wrapped optimizer's apply_gradients (on the reducing steps only, with
        aggregation)."""
        grads_and_vars = list(grads_and_vars)
        if self._agg_helper is not None:
            return self._agg_helper.apply_gradients(
                lambda: self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                                        name=name),
                self._optimizer, grads_and_vars, global_step=global_step, name=name)
        return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                               name=name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)
