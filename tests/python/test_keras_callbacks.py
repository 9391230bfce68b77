"""ringlet.keras's callbacks as Horovod's: what each takes, when it acts and
what it computes, in model.fit (four samples in batches of two: two steps an
epoch)."""

import numpy as np
import pytest

import ringlet.keras as hvd
import tensorflow as tf


FAMILIES = {"optimizer": tf.keras.optimizers.SGD, "legacy": tf.keras.optimizers.legacy.SGD}
STEPS = 2


def value(x):
    return float(tf.keras.backend.get_value(x))


class Recorder(tf.keras.callbacks.Callback):
    """The learning rate when each epoch begins and during each batch, and the momentum
    during and after each batch (placed after the callbacks it watches)."""

    def __init__(self):
        super().__init__()
        self.at_epoch_begin, self.in_batch, self.momentum_in, self.momentum_after = [], [], [], []

    def on_epoch_begin(self, epoch, logs=None):
        self.at_epoch_begin.append(value(self.model.optimizer.lr))

    def on_train_batch_begin(self, batch, logs=None):
        self.in_batch.append(value(self.model.optimizer.lr))
        if hasattr(self.model.optimizer, "momentum"):
            self.momentum_in.append(value(self.model.optimizer.momentum))

    def on_train_batch_end(self, batch, logs=None):
        if hasattr(self.model.optimizer, "momentum"):
            self.momentum_after.append(value(self.model.optimizer.momentum))


def fit(optimizer, callbacks, epochs):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer=hvd.DistributedOptimizer(optimizer), loss="mse")
    x = np.zeros((2 * STEPS, 2), np.float32)  # no gradient: the rates are all that changes
    recorder = Recorder()
    history = model.fit(x, np.zeros((2 * STEPS, 1), np.float32), batch_size=2, epochs=epochs,
                        verbose=0, callbacks=callbacks + [recorder])
    return recorder, history


def close(got, want):
    return np.allclose(got, want, rtol=1e-6, atol=0)


def test_broadcast_leaves_local_variables_alone(rk):
    n, r = rk.size(), rk.rank()
    root = n - 1
    # Not trainable, so that only the broadcast changes them.
    constant = tf.keras.initializers.Constant(float(r))
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(3, input_shape=(3,), kernel_initializer=constant,
                              bias_initializer=constant, trainable=False),
        tf.keras.layers.Dense(3, kernel_initializer=constant, bias_initializer=constant,
                              trainable=False)])
    model.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD()), loss="mse")
    local = list(model.layers[0].variables)
    callback = hvd.callbacks.BroadcastGlobalVariablesCallback(root, local_variables=local)
    model.fit(np.ones((1, 3)), np.ones((1, 3)), verbose=0, callbacks=[callback])
    local_refs = {v.ref() for v in local}
    for var in model.variables:
        want = r if var.ref() in local_refs else root
        assert np.array_equal(var.numpy(), np.full(var.shape, float(want))), var.name


def test_broadcast_and_metric_average_act_in_a_graph(rk):
    """In a tf.compat.v1 graph, which Keras trains in its session, the broadcast
    assigns the root's variables there, and the metric average is computed there by
    one op per metric, built once."""
    n, r = rk.size(), rk.rank()
    root = n - 1
    with tf.Graph().as_default() as graph:
        constant = tf.keras.initializers.Constant(float(r))
        model = tf.keras.Sequential([tf.keras.layers.Dense(
            2, input_shape=(2,), kernel_initializer=constant, bias_initializer=constant)])
        # A learning rate of 0: only the broadcast changes the weights.
        model.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.0)),
                      loss="mse")
        model.fit(np.ones((1, 2)), np.ones((1, 2)), verbose=0,
                  callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(root)])
        weights = model.get_weights()
        averaging = hvd.callbacks.MetricAverageCallback()
        averaged = []
        for epoch in range(2):
            logs = {"loss": 0.25 * (r + 1) + epoch, "count": r}
            averaging.on_epoch_end(epoch, logs)
            averaged.append(logs)
            if epoch == 0:
                built = len(graph.get_operations())
        assert len(graph.get_operations()) == built
    tf.keras.backend.clear_session()
    for w in weights:
        assert np.array_equal(w, np.full(w.shape, float(root)))
    for epoch, logs in enumerate(averaged):
        assert type(logs["loss"]) is np.float32
        assert close(logs["loss"], 0.25 * (n + 1) / 2 + epoch)
        assert close(logs["count"], (n - 1) / 2)


def test_broadcast_takes_one_variable_and_refuses_others(rk):
    var = tf.Variable(1.0)
    callback = hvd.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=var)
    assert callback._local_vars == {var.ref()}
    with pytest.raises(ValueError, match="tf.Variable"):
        hvd.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=[var, 1.0])


def test_metric_average_averages_every_entry_in_float32(rk):
    n, r = rk.size(), rk.rank()

    def logs_of(q):
        return {"loss": 0.1 * (q + 1), "val_loss": 1 / 3 + q, "count": q}

    logs = logs_of(r)
    hvd.callbacks.MetricAverageCallback().on_epoch_end(0, logs)
    assert sorted(logs) == ["count", "loss", "val_loss"]
    for key, got in logs.items():
        assert type(got) is np.float32, key
        mean = np.float32(sum(np.float32(logs_of(q)[key]) for q in range(n)) / np.float32(n))
        assert close(got, mean), (key, got, mean)


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_schedule_decays_at_each_epochs_first_batch(rk, kind):
    """A number multiplier m gives initial_lr * m ** (epoch - start_epoch), set when
    the epoch's first batch begins (so an epoch begins with the last epoch's rate)."""
    schedule = hvd.callbacks.LearningRateScheduleCallback(0.5, multiplier=0.5, start_epoch=1,
                                                          end_epoch=3)
    recorder, history = fit(FAMILIES[kind](1.0), [schedule], epochs=4)
    assert close(recorder.at_epoch_begin, [1.0, 1.0, 0.5, 0.25])
    assert close(recorder.in_batch, [1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25])
    lrs = history.history["lr"]
    assert close(lrs, [1.0, 0.5, 0.25, 0.25]) and all(type(v) is np.float32 for v in lrs)


def test_schedule_without_staircase_counts_fractional_epochs(rk):
    schedule = hvd.callbacks.LearningRateScheduleCallback(
        0.5, multiplier=lambda epoch: 1.0 + epoch, staircase=False)
    recorder, _ = fit(tf.keras.optimizers.SGD(1.0), [schedule], epochs=2)
    assert close(recorder.in_batch, [0.5 * (1 + e + b / STEPS) for e in range(2)
                                     for b in range(STEPS)])


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_warmup_reaches_initial_lr_on_its_last_batch(rk, kind, capsys):
    """From initial_lr / n towards initial_lr, batch by batch with the epoch counted
    at the batch's end; the momentum scaled by the rate's change for that batch."""
    n = rk.size()
    initial, warmup = 0.3, 2
    callback = hvd.callbacks.LearningRateWarmupCallback(initial, warmup_epochs=warmup,
                                                        verbose=1)
    recorder, history = fit(FAMILIES[kind](1.0, momentum=0.5), [callback], epochs=3)
    want = [initial / n * ((e + (b + 1) / STEPS) * (n - 1) / warmup + 1)
            for e in range(warmup) for b in range(STEPS)]
    want += [initial] * STEPS  # the epoch after the warmup keeps its last rate
    assert close(recorder.in_batch, want)
    assert close(want[warmup * STEPS - 1], initial)
    previous = [1.0] + want[:-1]
    momentum = [0.5 * new / old for new, old in zip(want[:warmup * STEPS], previous)]
    assert close(recorder.momentum_in, momentum + [0.5] * STEPS)
    assert close(recorder.momentum_after, [0.5] * len(want))
    assert close(history.history["lr"], [want[STEPS - 1], initial, initial])
    printed = capsys.readouterr().out
    if rk.rank() == 0:
        assert f"Epoch {warmup}: finished gradual learning rate warmup to 0.3." in printed
    else:
        assert "warmup" not in printed


def test_schedule_refuses_what_horovods_refuses(rk):
    with pytest.raises(ValueError, match="initial_lr"):
        hvd.callbacks.LearningRateScheduleCallback(None, multiplier=1.0)
    smooth = hvd.callbacks.LearningRateScheduleCallback(1.0, multiplier=1.0, staircase=False)
    smooth.set_params({"epochs": 1})
    with pytest.raises(ValueError, match="steps_per_epoch"):
        smooth.on_train_begin()
    smooth.set_params({"samples": 10, "batch_size": 4})  # older Keras's parameters
    smooth.on_train_begin()
    assert smooth.steps_per_epoch == 2
