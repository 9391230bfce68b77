"""ringlet.keras with model.fit(): DistributedOptimizer and the callbacks."""

import numpy as np
import pytest

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


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_backward_passes_per_step_applies_every_second_call(graph):
    """Gradients summed locally over two calls, averaged over them and over the
    ranks, applied on the second call; the first only counts the iteration."""
    hvd.init()
    try:
        n, r = hvd.size(), hvd.rank()
        w = tf.Variable([1.0, 2.0])
        opt = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.5), backward_passes_per_step=2,
                                       average_aggregated_gradients=True)

        def apply(g):
            opt.apply_gradients([(g, w)])
        step = tf.function(apply) if graph else apply
        first, second = tf.constant([r + 1.0, 0.0]), tf.constant([0.0, 2.0 * (r + 1)])
        step(first)
        assert w.numpy().tolist() == [1.0, 2.0]
        assert int(opt.iterations.numpy()) == 1
        step(second)
        mean_rank = (n + 1) / 2  # the mean of r + 1 over the ranks
        want = [1.0 - 0.5 * mean_rank / 2, 2.0 - 0.5 * 2 * mean_rank / 2]
        assert np.allclose(w.numpy(), want), (w.numpy(), want)
        assert int(opt.iterations.numpy()) == 2
        step(first)  # a new round: nothing applied yet
        assert np.allclose(w.numpy(), want)
        hvd.barrier()
    finally:
        hvd.shutdown()
