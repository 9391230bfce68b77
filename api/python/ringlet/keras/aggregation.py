"""Gradients summed over several backward passes before they are reduced:
DistributedOptimizer's ``backward_passes_per_step``, eager, inside
``tf.function`` and in ``tf.compat.v1`` graphs alike."""

import tensorflow as tf


class GradientAggregation:
    """This rank's running sum of each gradient, and the passes counted so far.

    Each pass adds its gradients to the sums and counts itself. The N-th pass
    gets the sums reduced over the ranks (and divided by N with ``average``),
    and leaves sums and count at zero; the passes before it get the running
    sums, unreduced. The optimizer applies only where the count is back at 0,
    so every N-th pass. Nothing is special about a gradient that is not
    finite: the update it reaches is applied as it is, and the sums are then
    cleared like any others, so the next round starts from zero.

    ``counter`` keeps Horovod's name: its scripts read it to know where in a
    round the optimizer is.
    """

    def __init__(self, passes, average, sparse_as_dense, reduce):
        self.passes = passes
        self.average = average
        self.sparse_as_dense = sparse_as_dense
        self._reduce = reduce  # (gradients, variables) -> what the N-th pass applies
        self._sums = {}  # variable ref -> its gradient's running sum
        with tf.init_scope():  # one counter, even if built inside a tf.function
            self.counter = _initialized(tf.Variable(0, dtype=tf.int32, trainable=False,
                                                    name="aggregation_counter"))

    def _dense(self, grad):
        if isinstance(grad, tf.IndexedSlices):
            if not self.sparse_as_dense:
                raise ValueError(
                    "DistributedOptimizer: a sparse gradient (tf.IndexedSlices) cannot be summed "
                    "over backward passes: pass sparse_as_dense=True with "
                    "backward_passes_per_step > 1")
            return tf.convert_to_tensor(grad)
        return grad

    def _sum_of(self, variable, grad):
        key = variable.ref()
        if key not in self._sums:
            with tf.init_scope():  # created once, outside any tf.function being traced
                self._sums[key] = _initialized(tf.Variable(tf.zeros(variable.shape, grad.dtype),
                                                           trainable=False))
        return self._sums[key]

    def compute_gradients(self, grads, variables):
        """What this pass hands the optimizer: the running sums, or on the N-th
        pass the reduced sums (None stays None)."""
        grads = [self._dense(g) for g in grads]
        present = [i for i, g in enumerate(grads) if g is not None]
        # Each step waits for the one before it through its value or a control
        # dependency: a tf.compat.v1 graph runs only what is waited for, in no
        # other order (eagerly and in a tf.function, program order holds anyway).
        totals = [tf.identity(self._sum_of(variables[i], grads[i]).assign_add(grads[i]))
                  for i in present]
        with tf.control_dependencies(totals):
            count = tf.identity(self.counter.assign_add(1))

        def reduce_and_clear():
            reduced = self._reduce(totals, [variables[i] for i in present])
            if self.average:
                reduced = [r / self.passes for r in reduced]
            with tf.control_dependencies(reduced):
                cleared = [self._sums[variables[i].ref()].assign(tf.zeros_like(totals[k]),
                                                                 read_value=False)
                           for k, i in enumerate(present)]
                cleared.append(self.counter.assign(0, read_value=False))
            with tf.control_dependencies(cleared):
                return [tf.constant(True)] + [tf.identity(r) for r in reduced]

        def keep_summing():
            return [tf.constant(False)] + totals

        # The leading flag keeps the branches' outputs a list even with no gradient.
        outs = tf.cond(tf.equal(count, self.passes), reduce_and_clear, keep_summing)
        out = [None] * len(grads)
        for i, value in zip(present, outs[1:]):
            out[i] = value
        return out

    def is_applying(self, grads):
        """True (a boolean tensor) on the pass whose gradients are to be applied, read
        once ``grads`` (what compute_gradients handed out) are computed."""
        with tf.control_dependencies([g for g in grads if g is not None]):
            return tf.equal(self.counter.read_value(), 0)


def _initialized(variable):
    """``variable``, initialized now in Keras's session when it belongs to a
    ``tf.compat.v1`` graph, which Keras trains there (as Horovod's helper does);
    eager variables are initialized already."""
    if not tf.executing_eagerly():
        tf.compat.v1.keras.backend.get_session().run(variable.initializer)
    return variable
