"""The learning-rate callbacks' rules (Horovod's), shared by tf-keras's
callbacks and Keras 3's: no framework here. Each callbacks module mixes these
classes in before its Keras's ``keras.callbacks.Callback`` and says how its
optimizers' rate and momentum are read and set (``read``, ``write``) and
under which name the rate is (``rate_attribute``)."""

from ringlet.common import basics as _basics


class LearningRateSchedule:
    """Sets the learning rate to ``initial_lr * multiplier(epoch)`` for the epochs from
    ``start_epoch`` up to ``end_epoch`` (exclusive). A number ``multiplier`` m decays
    exponentially: ``m ** (epoch - start_epoch)``. With ``staircase`` the rate changes
    at each epoch's first batch, with the whole epoch; without, at every batch, with
    the epoch counted fractionally (``epoch + batch / steps_per_epoch``;
    steps_per_epoch defaults to model.fit's steps). ``momentum_correction`` scales
    the momentum by the rate's change for the batch where it changes (where the
    optimizer reads its momentum at each step: Keras 3's optimizers read it when the
    step is traced)."""

    rate_attribute = "lr"

    @staticmethod
    def read(optimizer, attribute):
        """The value of the optimizer's ``attribute``, as a number."""
        raise NotImplementedError

    @staticmethod
    def write(optimizer, attribute, value):
        raise NotImplementedError

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
        if params.get("samples") and params.get("batch_size"):
            return params["samples"] // params["batch_size"]
        raise ValueError(f"{type(self).__name__}: cannot tell the number of steps per epoch: "
                         f"pass steps_per_epoch")

    def _adjust_learning_rate(self, epoch):
        optimizer = self.model.optimizer
        old_lr = self.read(optimizer, self.rate_attribute)
        new_lr = self.initial_lr * self.multiplier(epoch)
        self.write(optimizer, self.rate_attribute, new_lr)
        # Momentum SGD: the velocity carries the old rate's steps, so this step's
        # momentum is scaled by the rate's change (Goyal et al.); on_batch_end
        # restores it. Without momentum (none, or 0) there is nothing to scale.
        if self.momentum_correction and old_lr > 0 and \
                getattr(optimizer, "momentum", None) is not None:
            momentum = self.read(optimizer, "momentum")
            if momentum:
                self.restore_momentum = momentum
                self.write(optimizer, "momentum", momentum * new_lr / old_lr)

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
            self.write(self.model.optimizer, "momentum", self.restore_momentum)
            self.restore_momentum = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = self.read(self.model.optimizer, self.rate_attribute)


class LearningRateWarmup(LearningRateSchedule):
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
                  f"{self.read(self.model.optimizer, self.rate_attribute):g}.")
