"""ringlet.keras.elastic (``hvd.elastic``): Horovod's elastic training for
Keras. ``KerasState`` holds the model and optimizer; the callbacks keep
``state.batch`` and ``state.epoch`` current and commit the state, with
Horovod's rules:

- ``CommitStateCallback(state, batches_per_commit=1)`` commits every
  ``batches_per_commit`` batches and at each epoch's end;
- ``UpdateBatchStateCallback(state)`` sets ``state.batch`` to the batch
  that ended (0 at an epoch's end) and, with ``steps_per_epoch``, shortens
  the first epoch after a reset by the batches already done;
- ``UpdateEpochStateCallback(state)`` sets ``state.epoch`` to the epochs
  done in all, across resets."""

from ringlet.common import keras_selection as _keras_selection

if _keras_selection.choose() != _keras_selection.TF_KERAS:
    raise ImportError(f"ringlet.keras.elastic serves tf-keras only; this process serves "
                      f"{_keras_selection.reason()}")

import tf_keras as keras  # noqa: E402

from ringlet.tensorflow.elastic import TensorFlowKerasState, run  # noqa: E402


class KerasState(TensorFlowKerasState):
    """A Keras model and its optimizer (``optimizer`` or the compiled one)."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, backend=keras.backend, **kwargs)


class CommitStateCallback(keras.callbacks.Callback):
    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        # Every rank counts from the same point after a reset.
        self.batches_remaining = self.batches_per_commit

    def on_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    def __init__(self, state):
        super().__init__()
        self.state = state
        self.steps_per_epoch = None

    def on_train_begin(self, logs=None):
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = self.params.get("steps")
            self.params["steps"] = self.steps_per_epoch - self.state.batch

    def on_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    def __init__(self, state):
        super().__init__()
        self.state = state
        # Keras counts epochs from 0 in each fit(); the state counts them all.
        self.initial_epoch = self.state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        # +1: a reset right after the epoch ended must not repeat it.
        self.state.epoch = self.initial_epoch + epoch + 1


__all__ = ["KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
           "UpdateEpochStateCallback", "run"]
