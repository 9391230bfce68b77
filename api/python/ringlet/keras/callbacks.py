"""horovod.keras's callbacks for model.fit()."""

import numpy as np
import tf_keras as keras

from ringlet.common import basics as _basics
from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.functions import broadcast_variables
from ringlet.tensorflow import mpi_ops as _ops


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """After the first batch (once the optimizer has made its slots), every rank takes
    ``root_rank``'s model and optimizer variables."""

    def __init__(self, root_rank, device="", process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.process_set = process_set
        self.broadcast_done = False

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        broadcast_variables(self.model.variables, self.root_rank, self.process_set)
        optimizer = self.model.optimizer
        variables = optimizer.variables() if callable(optimizer.variables) else \
            optimizer.variables
        broadcast_variables(variables, self.root_rank, self.process_set)
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """At the end of each epoch, the logged metrics become their average over the ranks
    (place it before callbacks that read them, such as checkpoints or early stopping)."""

    def __init__(self, device="", process_set=global_process_set):
        super().__init__()
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        for key in sorted(logs):
            value = logs[key]
            if isinstance(value, (int, float, np.floating, np.integer)) or np.ndim(value) == 0:
                reduced = _ops.allreduce(np.asarray(value, dtype=np.float64),
                                         name=f"metric.{key}", process_set=self.process_set)
                logs[key] = float(reduced.numpy())


def _set_learning_rate(optimizer, value):
    lr = optimizer.learning_rate if hasattr(optimizer, "learning_rate") else optimizer.lr
    if hasattr(lr, "assign"):
        lr.assign(value)
    else:
        optimizer.learning_rate = value


def _get_learning_rate(optimizer):
    lr = optimizer.learning_rate if hasattr(optimizer, "learning_rate") else optimizer.lr
    return float(keras.backend.get_value(lr))


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to ``initial_lr * multiplier`` between ``start_epoch`` and
    ``end_epoch``: ``multiplier`` is a number or a function of the (fractional) epoch; with
    ``staircase`` it changes at epoch starts, else at every batch (needs steps_per_epoch or
    model.fit's steps)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.restore_momentum = None
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)

    def _active(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _adjust(self, epoch):
        optimizer = self.model.optimizer
        old = _get_learning_rate(optimizer)
        new = self.initial_lr * self.multiplier(epoch)
        _set_learning_rate(optimizer, new)
        # Momentum SGD: scale the momentum with the learning rate for this step, so that
        # the accumulated velocity does not overshoot when the rate grows.
        if self.momentum_correction and hasattr(optimizer, "momentum") and old > 0:
            momentum = optimizer.momentum
            value = float(keras.backend.get_value(momentum)) if not isinstance(
                momentum, float) else momentum
            self.restore_momentum = value
            self._set_momentum(optimizer, value * new / old)

    @staticmethod
    def _set_momentum(optimizer, value):
        if hasattr(optimizer.momentum, "assign"):
            optimizer.momentum.assign(value)
        else:
            optimizer.momentum = value

    def on_train_begin(self, logs=None):
        if self.steps_per_epoch is None and not self.staircase:
            self.steps_per_epoch = (self.params or {}).get("steps")
            if self.steps_per_epoch is None:
                raise ValueError("steps_per_epoch is needed when staircase=False and "
                                 "model.fit() does not know the steps")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self.staircase and self._active(epoch):
            self._adjust(epoch)

    def on_batch_begin(self, batch, logs=None):
        if not self.staircase and self._active(self.current_epoch):
            self._adjust(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_batch_end(self, batch, logs=None):
        if self.restore_momentum is not None:
            self._set_momentum(self.model.optimizer, self.restore_momentum)
            self.restore_momentum = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _get_learning_rate(self.model.optimizer)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate from ``initial_lr / size()`` to ``initial_lr`` over
    ``warmup_epochs``, batch by batch (Goyal et al., "Accurate, Large Minibatch SGD")."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            # at epoch 0 the rate is initial_lr / size, at warmup_epochs initial_lr
            size = _basics.size()
            return 1.0 / size * (epoch * (size - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and _basics.rank() == 0:
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to "
                  f"{_get_learning_rate(self.model.optimizer):g}.")
