"""ringlet.tensorflow.elastic (``hvd.elastic``): Horovod's elastic training
for TensorFlow. ``run`` is ringlet.common.elastic's loop, with the failures
of Ringlet's ops inside graphs (``tf.function``, Keras' ``fit``), which
reach the caller as TensorFlow errors alone, taken as the
HorovodInternalError they are. ``TensorFlowKerasState`` holds a Keras model
and its optimizer, ``TensorFlowState`` a list of variables.

Eager (TensorFlow 2) states are served; TensorFlow 1 sessions take the
``backend``/``session`` arguments as Horovod's do."""

import tensorflow as tf

from ringlet.common import exceptions
from ringlet.common.elastic import ObjectState, run_fn
from ringlet.tensorflow.errors import ERROR_CODE_PAYLOAD, from_op_error
from ringlet.tensorflow.functions import broadcast_object, broadcast_object_fn, broadcast_variables
from ringlet.common.basics import rank
from ringlet.tensorflow.util import _executing_eagerly


def _ringlet_failure(error):
    """The HorovodInternalError a TensorFlow error stands for, or None where
    it is not a failure of Ringlet's collectives across ranks."""
    payloads = getattr(error, "experimental_payloads", None) or {}
    ours = ERROR_CODE_PAYLOAD in payloads or ERROR_CODE_PAYLOAD.encode() in payloads
    if not ours and "ringlet" not in (error.message or ""):
        return None
    failure = from_op_error(error)
    if isinstance(failure, exceptions.HorovodInternalError) and \
            not isinstance(failure, ValueError):
        return failure
    return None


def run(func):
    """Decorates ``func(state, *args, **kwargs)`` to go on through resets
    (ringlet.common.elastic has the rules)."""

    def wrapper(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except tf.errors.OpError as e:
            failure = _ringlet_failure(e)
            if failure is None:
                raise
            raise failure from e

    return run_fn(wrapper)


def _global_variables():
    return tf.compat.v1.global_variables()


class TensorFlowKerasState(ObjectState):
    """A Keras model and its optimizer (``optimizer`` or the one compiled
    into the model); the model must be built. ``kwargs`` are plain
    attributes (epoch, batch, ...)."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        if not getattr(model, "built", True):
            raise ValueError("Model must be built first. Run `model.build(input_shape)`.")
        self.optimizer = optimizer or model.optimizer
        self.backend = backend
        self._save_model()
        if not backend or _executing_eagerly():
            self._bcast_model = self._broadcast_eagerly
            bcast_object = broadcast_object
        else:
            # Graph mode: one broadcast op, reused, not a new one per sync.
            bcast_op = broadcast_variables(_global_variables(), root_rank=0)
            self._bcast_model = lambda: self.backend.get_session().run(bcast_op)
            bcast_object = broadcast_object_fn(session=self.backend.get_session())
        super().__init__(bcast_object=bcast_object, get_rank=rank, **kwargs)

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        self._load_model()
        super().restore()

    def sync(self):
        self._create_optimizer_slots()
        self._bcast_model()
        self._save_model()
        super().sync()

    def _create_optimizer_slots(self):
        # A Keras optimizer makes its variables (momentum, ...) at its first
        # step: a worker that joins a job in progress has none yet, and its
        # list of variables must match the others' for the broadcast.
        if not _executing_eagerly():
            return
        variables = self.model.trainable_variables
        create_legacy = getattr(self.optimizer, "_create_all_weights", None)
        if create_legacy is not None:
            create_legacy(variables)
        elif hasattr(self.optimizer, "build") and not getattr(self.optimizer, "_built", False):
            self.optimizer.build(variables)

    def _broadcast_eagerly(self):
        broadcast_variables(self.model.variables, root_rank=0)
        broadcast_variables(self._optimizer_variables(), root_rank=0)

    def _optimizer_variables(self):
        variables = self.optimizer.variables
        return list(variables() if callable(variables) else variables)

    def _save_model(self):
        if _executing_eagerly():
            self._saved_model = [tf.identity(v) for v in self.model.variables]
            self._saved_optimizer = [tf.identity(v) for v in self._optimizer_variables()]
        else:
            self._saved_model = self.model.get_weights()
            self._saved_optimizer = self.optimizer.get_weights()

    def _load_model(self):
        if _executing_eagerly():
            for var, saved in zip(self.model.variables, self._saved_model):
                var.assign(saved)
            for var, saved in zip(self._optimizer_variables(), self._saved_optimizer):
                var.assign(saved)
        else:
            self.model.set_weights(self._saved_model)
            self.optimizer.set_weights(self._saved_optimizer)


class TensorFlowState(ObjectState):
    """A list of variables (default: the global variables), saved as numpy
    values; ``session`` for TensorFlow 1 graphs."""

    def __init__(self, variables=None, session=None, **kwargs):
        self.variables = variables or _global_variables()
        self.session = session or (None if _executing_eagerly()
                                   else tf.compat.v1.get_default_session())
        self._bcast_op = None if _executing_eagerly() else \
            broadcast_variables(self.variables, root_rank=0)
        self._save_model()
        bcast_object = broadcast_object if _executing_eagerly() else \
            broadcast_object_fn(session=self.session)
        super().__init__(bcast_object=bcast_object, get_rank=rank, **kwargs)

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        for var, value in zip(self.variables, self._values):
            if _executing_eagerly():
                var.assign(value)
            else:
                var.load(value, self.session)
        super().restore()

    def sync(self):
        if _executing_eagerly():
            broadcast_variables(self.variables, root_rank=0)
        else:
            self.session.run(self._bcast_op)
        self._save_model()
        super().sync()

    def _save_model(self):
        if _executing_eagerly():
            self._values = [v.numpy() for v in self.variables]
        else:
            self._values = [v.eval(self.session) for v in self.variables]


__all__ = ["TensorFlowKerasState", "TensorFlowState", "run"]
