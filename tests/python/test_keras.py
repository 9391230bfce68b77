"""ringlet.keras with model.fit(): DistributedOptimizer and the callbacks."""

import numpy as np

import ringlet.keras as hvd
import tensorflow as tf


def make_data(rank):
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], np.float32))[:, None]
    return x, y


def test_fit_with_callbacks_trains_the_same_model_everywhere():
    hvd.init()
    try:
        tf.random.set_seed(hvd.rank())  # different initial weights: the callback fixes that
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
        opt = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.05 * hvd.size(), momentum=0.5))
        model.compile(optimizer=opt, loss="mse")
        x, y = make_data(hvd.rank())
        history = model.fit(
            x, y, batch_size=16, epochs=3, verbose=0,
            callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                       hvd.callbacks.MetricAverageCallback(),
                       hvd.callbacks.LearningRateWarmupCallback(0.05 * hvd.size(),
                                                                warmup_epochs=2),
                       hvd.callbacks.LearningRateScheduleCallback(0.05 * hvd.size(),
                                                                  multiplier=0.5,
                                                                  start_epoch=2)])
        losses = history.history["loss"]
        assert losses[-1] < losses[0]
        # averaged metrics are the same number on every rank
        assert hvd.allgather(np.array([losses[-1]])).tolist() == [losses[-1]] * hvd.size()
        assert np.isclose(history.history["lr"][-1], 0.025 * hvd.size())
        for i, w in enumerate(model.get_weights()):
            gathered = hvd.allgather(w.reshape(1, -1), name=f"w{i}")
            assert np.array_equal(gathered, np.repeat(gathered[:1], hvd.size(), 0))
        hvd.barrier()
    finally:
        hvd.shutdown()


def test_distributed_optimizer_keeps_class_and_config():
    hvd.init()
    try:
        opt = hvd.DistributedOptimizer(tf.keras.optimizers.Adam(0.01))
        assert isinstance(opt, tf.keras.optimizers.Adam)
        assert np.isclose(opt.get_config()["learning_rate"], 0.01)
        assert np.allclose(hvd.allreduce(np.ones(2), op=hvd.Sum), hvd.size())
        hvd.barrier()
    finally:
        hvd.shutdown()
