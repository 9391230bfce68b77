"""DistributedOptimizer's reduction where the backend's collectives take a list
of dense tensors (PyTorch, JAX): which gradients go over the ranks, which stay
on this rank, and how an Average with ``gradient_predivide_factor`` is split.
TensorFlow's backend has its own (sparse gradients, tf.function)."""

from ringlet.common.basics import Average


def scale_factors(settings):
    """(op, prescale, postscale) for the core: an Average with predivide factor f
    divides by f before the sum and multiplies by f after it (the core divides by
    the set's size with the Average), as Horovod's optimizers do."""
    if settings.op == Average and settings.gradient_predivide_factor != 1.0:
        f = settings.gradient_predivide_factor
        return Average, 1.0 / f, f
    return settings.op, 1.0, 1.0


class GradientReducer:
    """Called as ``reducer(grads, variables)``: the gradients of the shared
    variables reduced in one grouped collective named ``name`` (None stays None),
    those of the variables registered local kept, divided by the set's size when
    ``scale_local_gradients``.

    ``reduce_group(tensors, name, op, prescale, postscale, compression,
    process_set)`` is the backend's grouped allreduce; ``divide(tensor, n)`` its
    division."""

    def __init__(self, settings, name, reduce_group, divide):
        self._settings = settings
        self._name = name
        self._reduce_group = reduce_group
        self._divide = divide
        self._op, self._prescale, self._postscale = scale_factors(settings)
        self._local = set()

    def register_local_var(self, variable):
        self._local.add(id(variable))

    def __call__(self, grads, variables):
        grads = list(grads)
        variables = list(variables)
        shared = [i for i, (g, v) in enumerate(zip(grads, variables))
                  if g is not None and id(v) not in self._local]
        out = list(grads)
        if shared:
            reduced = self._reduce_group([grads[i] for i in shared], self._name, self._op,
                                         self._prescale, self._postscale,
                                         self._settings.compression,
                                         self._settings.process_set)
            for i, r in zip(shared, reduced):
                out[i] = r
        if self._settings.scale_local_gradients and self._local:
            size = self._settings.process_set.size()
            for i, v in enumerate(variables):
                if id(v) in self._local and out[i] is not None:
                    out[i] = self._divide(out[i], size)
        return out
