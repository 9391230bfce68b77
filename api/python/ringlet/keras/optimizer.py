"""The tf-keras DistributedOptimizer (Keras 3's: keras3/optimizer.py): the
wrapped optimizer's own class, with gradients reduced over the ranks where
Keras computes them.

As in Horovod, the reduction happens in ``compute_gradients`` (and
``_compute_gradients``, ``get_gradients``), which ``minimize`` and so
``model.fit`` call; ``apply_gradients`` applies what it is given, so that
clipping and loss scaling see reduced gradients. The class keeps the wrapped
class's name, so a saved model loads without Ringlet, and carries its
settings, so ``from_config`` (as ``load_model`` uses it) gives a distributed
optimizer too.
"""

import tensorflow as tf

from ringlet.common.basics import Average
from ringlet.keras.aggregation import GradientAggregation
from ringlet.keras.settings import Settings, check  # noqa: F401  (the names tf_keras_api uses)
from ringlet.tensorflow.compression import Compression
from ringlet.tensorflow.gradient_tape import GradientReduction, scaled_down


class CallableList(list):
    """The optimizer's variables, readable as ``opt.variables`` and ``opt.variables()``
    whichever the wrapped class defines."""

    def __call__(self):
        return self


class _DistributedOptimizer:
    """Mixed in before the wrapped optimizer's class; see the module's docstring."""

    _ringlet_settings = Settings()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ringlet_setup()

    def _ringlet_setup(self):
        settings = type(self)._ringlet_settings
        # Horovod's naming: the collectives' name, and a legacy optimizer's name scope
        # and configured name.
        self._name = settings.name or f"Distributed{type(self).__name__}"
        # A gradient predivide factor only splits an average; with Sum, Horovod ignores it.
        predivide = settings.gradient_predivide_factor if settings.op == Average else 1.0
        self._allreduce_grads = GradientReduction(settings.compression or Compression.none,
                                                  settings.sparse_as_dense,
                                                  settings.op, predivide, settings.process_set,
                                                  device_dense=settings.device_dense,
                                                  device_sparse=settings.device_sparse)
        self._local_vars = set()
        self.process_set = settings.process_set
        self.scale_local_gradients = settings.scale_local_gradients
        self._agg_helper = None
        if settings.backward_passes_per_step > 1:
            self._agg_helper = GradientAggregation(
                settings.backward_passes_per_step, settings.average_aggregated_gradients,
                settings.sparse_as_dense, self._reduce_keeping_local)

    @property
    def variables(self):
        return CallableList(super().variables())

    def register_local_var(self, var):
        """Keeps ``var``'s gradient on this rank: not reduced over the ranks, only
        divided by their number when ``scale_local_gradients`` (Horovod's default)."""
        self._local_vars.add(var.ref())

    def compute_gradients(self, loss, var_list, tape=None):
        """The (gradient, variable) pairs of ``loss``, gradients reduced over the ranks."""
        return self._compute_gradients(loss, var_list, None, tape)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        base = super()
        tape = tf.GradientTape() if tape is None else tape
        if hasattr(base, "_compute_gradients"):  # the legacy optimizers'
            pairs = base._compute_gradients(loss, var_list, grad_loss, tape=tape)
        else:
            pairs = base.compute_gradients(loss, var_list, tape=tape)
        pairs = list(pairs)
        if not pairs:
            return pairs
        grads, variables = [g for g, _ in pairs], [v for _, v in pairs]
        return list(zip(self._allreduce(grads, variables), variables))

    def get_gradients(self, loss, params):
        """The legacy optimizers' graph-mode gradients, reduced over the ranks."""
        return self._allreduce(super().get_gradients(loss, params), params)

    def _allreduce(self, grads, variables):
        if self._agg_helper is not None:
            return self._agg_helper.compute_gradients(list(grads), list(variables))
        return self._reduce_keeping_local(list(grads), list(variables))

    def _reduce_keeping_local(self, grads, variables):
        """Every gradient reduced over the ranks but the local variables', which are
        divided by the ranks' number instead when scale_local_gradients."""
        shared = [i for i, v in enumerate(variables) if v.ref() not in self._local_vars]
        out = list(grads)
        reduced = self._allreduce_grads([grads[i] for i in shared], self._name)
        for i, r in zip(shared, reduced):
            out[i] = r
        if self.scale_local_gradients and self._local_vars:
            for i, v in enumerate(variables):
                if v.ref() in self._local_vars and out[i] is not None:
                    out[i] = scaled_down(out[i], self._allreduce_grads)
        return out

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        """Applies the gradients given; with backward_passes_per_step N, only on the
        N-th pass of each round, the others counting the optimizer's iterations so
        that learning rate schedules keep their pace."""
        if self._agg_helper is None:
            return super().apply_gradients(grads_and_vars, *args, **kwargs)
        pairs = list(grads_and_vars)  # a zip would be spent by the first branch traced
        with tf.init_scope():
            iterations = self.iterations  # a legacy optimizer makes it on first use

        # Each branch's value waits for its update: a tf.compat.v1 graph's branches
        # run only what their values wait for.
        def apply():
            applied = super(_DistributedOptimizer, self).apply_gradients(pairs, *args, **kwargs)
            with tf.control_dependencies([applied]):
                return tf.identity(iterations)

        def count_only():
            with tf.control_dependencies([iterations.assign_add(1)]):
                return tf.identity(iterations)

        applying = self._agg_helper.is_applying([g for g, _ in pairs])
        return tf.cond(applying, apply, count_only)


def distributed_class(base, settings):
    """``base`` (a Keras optimizer class) with the reduction mixed in, under its own name."""
    # The base's module too: Keras saves a class's module, and must find the class
    # there when it loads the model without Ringlet.
    return type(base.__name__, (_DistributedOptimizer, base),
                {"_ringlet_settings": settings, "__module__": base.__module__})


def wrap(optimizer, settings):
    """A new optimizer of ``optimizer``'s class and configuration, distributed (as in
    Horovod, the wrapped optimizer's state, such as its slots, is not carried over)."""
    return distributed_class(type(optimizer), settings).from_config(optimizer.get_config())


def distribute_in_place(optimizer, settings):
    """Makes ``optimizer`` itself distributed, keeping its variables and their values
    (slots, iterations): how load_model serves whatever optimizer Keras restored,
    whichever format the model was saved in."""
    if not isinstance(optimizer, _DistributedOptimizer):
        optimizer.__class__ = distributed_class(type(optimizer), settings)
        optimizer._ringlet_setup()
    return optimizer
