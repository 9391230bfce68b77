"""Horovod's Keras callbacks for Keras 3's ``model.fit()``, with Horovod's rules
(the tf-keras ones are ringlet.keras.callbacks under tf-keras). Keras 3 runs
callbacks eagerly, between the compiled steps; the collectives go through
the backend seam."""

import keras
import numpy as np

from ringlet.common.process_sets import global_process_set
from ringlet.keras import learning_rate_schedule as _schedule
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


class _OptimizerValues:
    """How Keras 3's optimizers' rate (``learning_rate``) and momentum are read and
    set."""

    rate_attribute = "learning_rate"

    @staticmethod
    def read(optimizer, attribute):
        return float(keras.ops.convert_to_numpy(getattr(optimizer, attribute)))

    @staticmethod
    def write(optimizer, attribute, value):
        current = getattr(optimizer, attribute)
        if hasattr(current, "assign"):
            current.assign(value)
        else:  # Keras 3's optimizers keep momentum as a number, read when a step is traced
            setattr(optimizer, attribute, value)


class LearningRateScheduleCallback(_OptimizerValues, _schedule.LearningRateSchedule,
                                   keras.callbacks.Callback):
    __doc__ = _schedule.LearningRateSchedule.__doc__


class LearningRateWarmupCallback(_OptimizerValues, _schedule.LearningRateWarmup,
                                 keras.callbacks.Callback):
    __doc__ = _schedule.LearningRateWarmup.__doc__


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
