"""Local gradient aggregation for TensorFlow 1 style optimizers: with
``backward_passes_per_step`` N, gradients are summed on each rank over N steps
and reduced over the ranks, and applied, on every N-th step only. Graphs only
(``tf.compat.v1``), as in Horovod."""

import weakref

import tensorflow as tf

from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.mpi_ops import _size_of


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

    ``allreduce_func(grads, variables)`` reduces a list of gradients over the
    ranks; the gradients of variables given to ``register_local_var`` are not
    passed to it: they stay this rank's, divided by the size of ``process_set``
    when ``scale_local_gradients``. The optimizer calls compute_gradients() then
    apply_gradients() once per step, which applies only on the steps that
    reduced (and otherwise advances the global step alone, so that schedules
    keep their pace).

    Each graph gets its own sums and counter (``counter`` is the last graph's);
    with ``optimizer_type`` ``_OPTIMIZER_TYPE_KERAS`` they are initialized in
    Keras's session when made, as Keras runs no local variables' initializer.
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
        # Per graph: (counter, sums), a sum per gradient or None for a None gradient.
        self._by_graph = weakref.WeakKeyDictionary()
        self.counter = None

    def register_local_var(self, var):
        """Marks ``var`` as this rank's own: its gradient is summed but not reduced."""
        self._local_vars.add(var.ref())

    def _local_variable(self, initial, name):
        return tf.compat.v1.Variable(initial, trainable=False, name=name,
                                     collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])

    def _variables_for(self, grads):
        """This graph's counter and sums, made on its first call."""
        graph = tf.compat.v1.get_default_graph()
        made = self._by_graph.get(graph)
        if made is None:
            prefix = f"aggregation_variables_{self.name}{self.rank}"
            counter = self._local_variable(tf.constant(0, tf.int32), f"{prefix}/counter")
            sums = [None if g is None else
                    self._local_variable(tf.zeros(g.shape, g.dtype), f"{prefix}/{i}")
                    for i, g in enumerate(grads)]
            if self.optimizer_type == self._OPTIMIZER_TYPE_KERAS:
                session = tf.compat.v1.keras.backend.get_session(op_input_list=())
                session.run(tf.compat.v1.variables_initializer(
                    [counter] + [s for s in sums if s is not None]))
            made = self._by_graph[graph] = (counter, sums)
        counter, sums = made
        if [s is None for s in sums] != [g is None for g in grads] or any(
                s is not None and not s.shape.is_compatible_with(g.shape)
                for s, g in zip(sums, grads)):
            raise ValueError(
                f"LocalGradientAggregationHelper: compute_gradients() was called in this "
                f"graph with {len(sums)} gradients of other shapes before; one helper sums "
                f"one list of gradients per graph")
        self.counter = counter
        return counter, sums

    def _variables_for_apply(self):
        made = self._by_graph.get(tf.compat.v1.get_default_graph())
        if made is None:
            raise ValueError("LocalGradientAggregationHelper: apply_gradients() in a graph "
                             "where compute_gradients() was not called")
        return made

    def _reduce(self, grads, variables):
        """``grads`` reduced by ``allreduce_func``, but for the local variables'."""
        shared = [i for i, v in enumerate(variables) if v.ref() not in self._local_vars]
        out = list(grads)
        if shared:
            reduced = self._allreduce_grads([grads[i] for i in shared],
                                            [variables[i] for i in shared])
            for i, r in zip(shared, reduced):
                out[i] = r
        if self.scale_local_gradients and len(shared) < len(variables):
            out = [g / _size_of(self.process_set, g.dtype) if v.ref() in self._local_vars else g
                   for g, v in zip(out, variables)]
        return out

    def _reduced_sums(self, counter, sums, variables):
        present = [i for i, s in enumerate(sums) if s is not None]
        read = [sums[i].read_value() for i in present]
        reduced = self._reduce(read, [variables[i] for i in present])
        with tf.control_dependencies(reduced):
            reset = counter.assign(0)
        with tf.control_dependencies([reset]):
            divisor = self.backward_passes_per_step if self.average_aggregated_gradients else 1
            return [tf.identity(r / divisor if divisor != 1 else r) for r in reduced]

    def compute_gradients(self, grads, vars):
        """Adds ``grads`` to the sums; returns the reduced sums on every N-th call and
        the gradients as given on the others (which apply_gradients does not apply)."""
        grads = [None if g is None else _dense(g, self.sparse_as_dense) for g in grads]
        counter, sums = self._variables_for(grads)
        present = [i for i, g in enumerate(grads) if g is not None]
        first = tf.equal(counter, 0)
        cleared = tf.cond(first, lambda: tf.group(*[sums[i].assign(tf.zeros_like(grads[i]))
                                                    for i in present]), tf.no_op)
        with tf.control_dependencies([cleared]):
            added = tf.group(*[sums[i].assign_add(grads[i]) for i in present])
        with tf.control_dependencies([added]):
            count = counter.assign_add(1)
        passes = self.backward_passes_per_step
        reduced = tf.cond(tf.equal(count, passes),
                          lambda: self._reduced_sums(counter, sums, vars),
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
        counter, _ = self._variables_for_apply()

        def count_only():
            iterations = getattr(optimizer, "iterations", None)
            return iterations.assign_add(1).op if iterations is not None else tf.no_op()

        with tf.control_dependencies(grads):
            applied = tf.cond(tf.equal(counter, 0), apply_grads_closure, count_only)

        def advance_global_step():
            step = kwargs.get("global_step")
            if step is None:
                return tf.no_op()
            return step.assign_add(tf.constant(1, step.dtype.base_dtype), read_value=False)

        with tf.control_dependencies([applied]):
            return tf.cond(tf.equal(counter, 0), tf.no_op, advance_global_step)
