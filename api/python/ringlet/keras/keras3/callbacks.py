"""Horovod's Keras callbacks for Keras 3's ``model.fit()``, with Horovod's rules
(the tf-keras ones are ringlet.keras.callbacks under tf-keras). Keras 3 runs
callbacks eagerly, between the compiled steps; the collectives go through
the backend seam."""

import keras
import numpy as np

from ringlet.common import basics as _basics
from ringlet.common.process_sets import global_process_set
from ringlet.keras.keras3 import api as _api
from ringlet.keras.keras3 import optimizer as _optimizer


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """After the first batch (once the optimizer has made its slots), every rank takes
    ``root_rank``'s model variables, but ``local_variables`` (a variable or a list of
    them), and all of its optimizer's variables."""

    def __init__(self, root_rank, device="", local_variables=None, *,
                 process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.device = device  # Horovod's argument; Keras 3 places the ops itself
        self.process_set = process_set
        self.broadcast_done = False
        self._local_vars = set()
        if local_variables is None:
            local_variables = []
        elif not isinstance(local_variables, (list, tuple)):
            local_variables = [local_variables]
        for var in local_variables:
            self.register_local_var(var)

    def register_local_var(self, var):
        """Leaves ``var`` out of the broadcast: each rank keeps its own value."""
        self._local_vars.add(id(var))

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        shared = [v for v in self.model.variables if id(v) not in self._local_vars]
        _api.broadcast_variables(shared, self.root_rank, self.process_set)
        if self.model.optimizer is not None:
            own = {id(v) for v in _optimizer.rank_own_variables(self.model.optimizer)}
            _api.broadcast_variables(
                [v for v in self.model.optimizer.variables if id(v) not in own],
                self.root_rank, self.process_set)
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """At the end of each epoch, every entry of the logs becomes its average over the
    ranks, computed in Keras's float type (float32) as Horovod does (place it before
    callbacks that read them, such as checkpoints or early stopping)."""

    def __init__(self, device="", *, process_set=global_process_set):
        super().__init__()
        self.device = device
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        # Every rank reduces the same keys in the same (sorted) order.
        for key in sorted(logs):
            value = np.asarray(logs[key], dtype=keras.config.floatx())
            average = _api.allreduce(value, name=f"metric.{key}",
                                     process_set=self.process_set)
            logs[key] = float(keras.ops.convert_to_numpy(average))


def _get(optimizer, attribute):
    return float(keras.ops.convert_to_numpy(getattr(optimizer, attribute)))


def _set(optimizer, attribute, value):
    current = getattr(optimizer, attribute)
    if hasattr(current, "assign"):
        current.assign(value)
    else:  # Keras 3's optimizers keep momentum as a number, read when a step is traced
        setattr(optimizer, attribute, value)


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to ``initial_lr * multiplier(epoch)`` for the epochs from
    ``start_epoch`` up to ``end_epoch`` (exclusive). A number ``multiplier`` m decays
    exponentially: ``m ** (epoch - start_epoch)``. With ``staircase`` the rate changes
    at each epoch's first batch, with the whole epoch; without, at every batch, with
    the epoch counted fractionally (``epoch + batch / steps_per_epoch``;
    steps_per_epoch defaults to model.fit's steps). ``momentum_correction`` scales
    the momentum by the rate's change for the batch where it changes (where the
    optimizer reads its momentum at each step: Keras 3's optimizers read it when the
    step is traced)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError("LearningRateScheduleCallback: initial_lr is required")
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.restore_momentum = None
        if callable(multiplier):
            self.multiplier = multiplier
        else:
            self.multiplier = lambda epoch: multiplier ** (epoch - start_epoch)

    def _autodetect_steps_per_epoch(self):
        params = self.params or {}
        if params.get("steps"):
            return params["steps"]
        raise ValueError(f"{type(self).__name__}: cannot tell the number of steps per epoch: "
                         f"pass steps_per_epoch")

    def _adjust_learning_rate(self, epoch):
        optimizer = self.model.optimizer
        old_lr = _get(optimizer, "learning_rate")
        new_lr = self.initial_lr * self.multiplier(epoch)
        _set(optimizer, "learning_rate", new_lr)
        # Momentum SGD: the velocity carries the old rate's steps, so this step's
        # momentum is scaled by the rate's change (Goyal et al.); on_batch_end restores it.
        if self.momentum_correction and getattr(optimizer, "momentum", None) and old_lr > 0:
            self.restore_momentum = _get(optimizer, "momentum")
            _set(optimizer, "momentum", self.restore_momentum * new_lr / old_lr)

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_batch_begin(self, batch, logs=None):
        if self.current_epoch < self.start_epoch or (
                self.end_epoch is not None and self.current_epoch >= self.end_epoch):
            return
        if self.staircase:
            if batch == 0:
                self._adjust_learning_rate(self.current_epoch)
        else:
            self._adjust_learning_rate(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_batch_end(self, batch, logs=None):
        if self.restore_momentum is not None:
            _set(self.model.optimizer, "momentum", self.restore_momentum)
            self.restore_momentum = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _get(self.model.optimizer, "learning_rate")


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate from ``initial_lr / size()`` to ``initial_lr`` over the
    first ``warmup_epochs``, batch by batch, reaching ``initial_lr`` with the last batch
    of the warmup (Goyal et al., "Accurate, Large Minibatch SGD")."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            # Counted at the batch's end, so that each epoch ends on a round number.
            epoch += 1.0 / self.steps_per_epoch
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
                  f"{_get(self.model.optimizer, 'learning_rate'):g}.")


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """A ModelCheckpoint that keeps only the best model by ``monitor``; its
    ``filepath`` is set later by whoever runs the training (Horovod's rule), before
    ``model.fit``. Keras 3 wants a path ending in ``.keras`` (``.weights.h5`` with
    ``save_weights_only``)."""

    def __init__(self, monitor="val_loss", verbose=0, save_weights_only=False, mode="auto",
                 save_freq="epoch"):
        # Keras 3 checks the path's suffix at construction: a placeholder passes it.
        placeholder = "best.weights.h5" if save_weights_only else "best.keras"
        super().__init__(filepath=placeholder, monitor=monitor, verbose=verbose,
                         save_best_only=True, save_weights_only=save_weights_only, mode=mode,
                         save_freq=save_freq)
        self.filepath = None

    def on_train_begin(self, logs=None):
        if self.filepath is None:
            raise ValueError("BestModelCheckpoint: set its filepath before model.fit")
        super().on_train_begin(logs)
