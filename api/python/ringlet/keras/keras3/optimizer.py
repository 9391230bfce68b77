"""Keras 3's DistributedOptimizer: the wrapped optimizer's own class, whose
``apply`` (and so ``apply_gradients``, which ``model.fit``'s train step calls)
applies the gradients reduced over the ranks.

Keras 3 computes gradients outside the optimizer (the train step's tape), so,
as Horovod does with Keras's newer optimizers, the reduction sits where they
are applied; clipping, weight decay and loss scaling then see the reduced
gradients.

``backward_passes_per_step`` N: each pass adds its gradients to this rank's
running sums; the N-th pass reduces the sums (divided by N with
``average_aggregated_gradients``), applies them and clears the sums; the
other passes only count the optimizer's ``iterations``, so that learning rate
schedules keep their pace (Horovod's rule). The sums and the pass counter are
among the optimizer's ``variables``, as Keras keeps its own gradient
accumulators: a stateless backend (JAX) carries only those from step to step,
and a checkpoint keeps them. They are each rank's own, though:
``rank_own_variables`` names them, and BroadcastGlobalVariablesCallback leaves
them out.

The class keeps the wrapped class's name and module, so a saved model loads
without Ringlet, and carries its settings, so ``from_config`` gives a
distributed optimizer too. Only the backend seam (``backends``) touches a
framework's collectives; the rest is Keras.
"""

import keras
from keras import ops

from ringlet.keras.settings import Settings


class _Aggregation:
    """This rank's running sum of each gradient and the passes counted."""

    def __init__(self, passes, average, sparse_as_dense):
        self.passes = passes
        self.average = average
        self.sparse_as_dense = sparse_as_dense
        self.sums = None
        self.counter = None

    def build(self, optimizer, variables):
        self.sums = [optimizer.add_variable_from_reference(v, name="ringlet_gradient_sum")
                     for v in variables]
        self.counter = optimizer.add_variable(shape=(), dtype="int32",
                                              name="ringlet_backward_passes")

    def variables(self):
        return [] if self.sums is None else self.sums + [self.counter]

    def dense(self, grad, backend):
        if backend.is_sparse(grad):
            if not self.sparse_as_dense:
                raise ValueError(
                    "DistributedOptimizer: a sparse gradient cannot be summed over backward "
                    "passes: pass sparse_as_dense=True with backward_passes_per_step > 1")
            return backend.densify(grad)
        return grad


class _DistributedOptimizer:
    """Mixed in before the wrapped optimizer's class; see the module's docstring."""

    _ringlet_settings = Settings()
    _ringlet_backend = None  # the seam's module (ringlet.keras.keras3.backends)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ringlet_setup()

    def _ringlet_setup(self):
        settings = type(self)._ringlet_settings
        # Horovod's naming of the collectives.
        self._ringlet_name = settings.name or f"Distributed{type(self).__name__}"
        self._ringlet_reduce = type(self)._ringlet_backend.GradientReducer(
            settings, self._ringlet_name)
        self.process_set = settings.process_set
        self.backward_passes_per_step = settings.backward_passes_per_step
        self._ringlet_aggregation = None
        if settings.backward_passes_per_step > 1:
            self._ringlet_aggregation = _Aggregation(
                settings.backward_passes_per_step, settings.average_aggregated_gradients,
                settings.sparse_as_dense)
            if self.built:
                self._ringlet_aggregation.build(self, self._trainable_variables)

    def register_local_var(self, var):
        """Keeps ``var``'s gradient on this rank: not reduced over the ranks, only
        divided by their number when ``scale_local_gradients`` (Horovod's default)."""
        self._ringlet_reduce.register_local_var(var)

    def build(self, variables):
        super().build(variables)
        if self._ringlet_aggregation is not None and self._ringlet_aggregation.sums is None:
            self._ringlet_aggregation.build(self, variables)

    def apply(self, grads, trainable_variables=None):
        """Applies ``grads`` reduced over the ranks (every N-th pass with
        backward_passes_per_step N)."""
        grads = list(grads)
        if not grads:
            return
        if trainable_variables is None:
            trainable_variables = list(self._trainable_variables)
        else:
            trainable_variables = list(trainable_variables)
            if not self.built:
                with keras.name_scope(self.name, caller=self):
                    self.build(trainable_variables)
                self.built = True
        base = super(_DistributedOptimizer, self)
        if self._ringlet_aggregation is None:
            return base.apply(self._ringlet_reduce(grads, trainable_variables),
                              trainable_variables)
        return self._apply_aggregated(base, grads, trainable_variables)

    def _apply_aggregated(self, base, grads, variables):
        agg = self._ringlet_aggregation
        present = [i for i, g in enumerate(grads) if g is not None]
        sums = [agg.sums[self._get_variable_index(variables[i])] for i in present]
        for i, total in zip(present, sums):
            total.assign_add(agg.dense(grads[i], self._ringlet_backend))
        agg.counter.assign_add(1)
        present_vars = [variables[i] for i in present]

        def reduce_and_apply():
            reduced = self._ringlet_reduce([ops.convert_to_tensor(s) for s in sums],
                                           present_vars)
            if agg.average:
                reduced = [r / agg.passes for r in reduced]
            base.apply(reduced, present_vars)
            for total in sums:
                total.assign(ops.zeros(total.shape, total.dtype))
            agg.counter.assign(0)

        def count_only():
            self._iterations.assign_add(1)

        # What either branch may read or assign, for a backend that runs the
        # branches statelessly (JAX).
        state = self.variables + list(self._trainable_variables)
        self._ringlet_backend.cond(ops.equal(agg.counter, agg.passes), reduce_and_apply,
                                   count_only, state)


def rank_own_variables(optimizer):
    """The variables of ``optimizer`` that hold this rank's own running sums (none
    unless it is distributed with backward_passes_per_step > 1): a broadcast of
    the optimizer's state leaves them out."""
    aggregation = getattr(optimizer, "_ringlet_aggregation", None)
    return [] if aggregation is None else aggregation.variables()


def distributed_class(base, settings, backend):
    """``base`` (a Keras 3 optimizer class) with the reduction mixed in, under its own
    name and module (Keras saves both, and finds the class there when it loads the
    model without Ringlet)."""
    return type(base.__name__, (_DistributedOptimizer, base),
                {"_ringlet_settings": settings, "_ringlet_backend": backend,
                 "__module__": base.__module__})


def wrap(optimizer, settings, backend):
    """A new optimizer of ``optimizer``'s class and configuration, distributed (as in
    Horovod, the wrapped optimizer's state is not carried over)."""
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise ValueError(f"DistributedOptimizer: expected a keras.optimizers.Optimizer "
                         f"(Keras {keras.__version__}), not {type(optimizer).__module__}."
                         f"{type(optimizer).__name__}")
    if isinstance(optimizer, _DistributedOptimizer):
        raise ValueError("DistributedOptimizer: the optimizer is distributed already")
    return distributed_class(type(optimizer), settings, backend).from_config(
        optimizer.get_config())


def distribute_in_place(optimizer, settings, backend):
    """Makes ``optimizer`` itself distributed, keeping its variables and their values
    (slots, iterations): how load_model serves the optimizer Keras restored."""
    if not isinstance(optimizer, _DistributedOptimizer):
        optimizer.__class__ = distributed_class(type(optimizer), settings, backend)
        optimizer._ringlet_setup()
    return optimizer
