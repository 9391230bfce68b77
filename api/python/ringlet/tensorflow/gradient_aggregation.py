"""Local gradient aggregation for TensorFlow 1 style optimizers: with
``backward_passes_per_step`` N, gradients are summed on each rank over N steps
and reduced over the ranks, and applied, on every N-th step only. Graphs only
(``tf.compat.v1``), as in Horovod."""

import tensorflow as tf

from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.gradient_tape import reduce_shared


def _dense(grad, sparse_as_dense):
    if isinstance(grad, tf.IndexedSlices):
        if not sparse_as_dense:
            raise ValueError("IndexedSlices are not supported when `backward_passes_per_step` "
                             "> 1 and `sparse_as_dense` is False.")
        return tf.convert_to_tensor(grad)
    return grad


class LocalGradientAggregationHelper:
    """Sums gradients in local variables (``LOCAL_VARIABLES``, not trained, not
    broadcast) and reduces the sums every ``backward_passes_per_step``-th call.

    ``allreduce_func(grads, variables)`` reduces a list of gradients; the
    optimizer calls compute_gradients() then apply_gradients() once per step,
    which applies only on the steps that reduced (and otherwise advances the
    global step alone, so that schedules keep their pace).
    """

    _OPTIMIZER_TYPE_KERAS = "optimizer_type_keras"
    _OPTIMIZER_TYPE_LEGACY = "optimizer_type_legacy"

    def __init__(self, backward_passes_per_step, allreduce_func, sparse_as_dense,
                 average_aggregated_gradients, rank, optimizer_type,
                 process_set=global_process_set, scale_local_gradients=True, name=""):
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_grads = allreduce_func
        self.sparse_as_dense = sparse_as_dense
        self.average_aggregated_gradients = average_aggregated_gradients
        self.rank = rank
        self.optimizer_type = optimizer_type
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self.name = name
        self._local_vars = set()
        self.counter = None
        self._sums = []  # per gradient: its running sum, or None for a None gradient

    def register_local_var(self, var):
        """Marks ``var`` as this rank's own: its gradient is summed but not reduced."""
        self._local_vars.add(var.ref())

    def _local_variable(self, initial, name):
        return tf.compat.v1.Variable(initial, trainable=False, name=name,
                                     collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])

    def _create(self, grads):
        prefix = f"aggregation_variables_{self.name}{self.rank}"
        self.counter = self._local_variable(tf.constant(0, tf.int32), f"{prefix}/counter")
        self._sums = [None if g is None else
                      self._local_variable(tf.zeros(g.shape, g.dtype), f"{prefix}/{i}")
                      for i, g in enumerate(grads)]

    def _reduced_sums(self, variables):
        sums = [None if s is None else s.read_value() for s in self._sums]
        present = [i for i, s in enumerate(sums) if s is not None]
        reduced = list(sums)
        for i, r in zip(present, self._allreduce_grads([sums[i] for i in present],
                                                        [variables[i] for i in present])):
            reduced[i] = r
        with tf.control_dependencies([r for r in reduced if r is not None]):
            reset = self.counter.assign(0)
        with tf.control_dependencies([reset]):
            divisor = self.backward_passes_per_step if self.average_aggregated_gradients else 1
            return [tf.identity(r / divisor if divisor != 1 else r) for r in reduced
                    if r is not None]

    def compute_gradients(self, grads, vars):
        """Adds ``grads`` to the sums; returns the reduced sums on every N-th call and
        the gradients as given on the others (which apply_gradients does not apply)."""
        grads = [None if g is None else _dense(g, self.sparse_as_dense) for g in grads]
        if self.counter is None:
            self._create(grads)
        present = [i for i, g in enumerate(grads) if g is not None]
        first = tf.equal(self.counter, 0)
        cleared = tf.cond(first, lambda: tf.group(*[self._sums[i].assign(tf.zeros_like(grads[i]))
                                                    for i in present]), tf.no_op)
        with tf.control_dependencies([cleared]):
            added = tf.group(*[self._sums[i].assign_add(grads[i]) for i in present])
        with tf.control_dependencies([added]):
            count = self.counter.assign_add(1)
        passes = self.backward_passes_per_step
        reduced = tf.cond(tf.equal(count, passes), lambda: self._reduced_sums(vars),
                          lambda: [tf.identity(grads[i]) for i in present])
        if not isinstance(reduced, (list, tuple)):
            reduced = [reduced]
        out = [None] * len(grads)
        for i, r in zip(present, reduced):
            out[i] = r
        return out

    def apply_gradients(self, apply_grads_closure, optimizer, *args, **kwargs):
        """Runs ``apply_grads_closure`` on the steps that reduced; on the others, advances
        ``global_step`` (given as a keyword) and the optimizer's ``iterations`` alone."""
        grads = [g for g, _ in args[0] if g is not None] if args else []

        def count_only():
            iterations = getattr(optimizer, "iterations", None)
            return iterations.assign_add(1).op if iterations is not None else tf.no_op()

        with tf.control_dependencies(grads):
            applied = tf.cond(tf.equal(self.counter, 0), apply_grads_closure, count_only)

        def advance_global_step():
            step = kwargs.get("global_step")
            if step is None:
                return tf.no_op()
            return step.assign_add(tf.constant(1, step.dtype.base_dtype), read_value=False)

        with tf.control_dependencies([applied]):
            return tf.cond(tf.equal(self.counter, 0), tf.no_op, advance_global_step)


def reduce_for_optimizer(reduction, local_vars, scale_local, name):
    """An ``allreduce_func`` for the helper: ``reduction`` but for ``local_vars``."""
    def allreduce_func(grads, variables):
        return reduce_shared(reduction, grads, variables, local_vars, scale_local, name)
    return allreduce_func
