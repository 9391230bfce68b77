"""ringlet.keras on Keras 3, on the backend KERAS_BACKEND names (TensorFlow,
PyTorch or JAX; one job each): DistributedOptimizer, the callbacks in
model.fit, a custom loop in the backend's own idiom, the collectives on Keras
tensors and load_model, each checked against values computed here. On
TensorFlow the steps run uncompiled, or XLA-compiled in a job of its own
(RINGLET_TEST_JIT_COMPILE=1); on PyTorch uncompiled; on JAX as Keras
compiles them by default, with jax.jit. Run in a job of its own: tf-keras and Keras 3 are never served
in one process."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

import ringlet.keras as hvd
from ringlet.keras.keras3.optimizer import _DistributedOptimizer

BACKEND = keras.backend.backend()
# model.compile's arguments: Keras's default on JAX (jit); on TensorFlow,
# XLA-compiled where RINGLET_TEST_JIT_COMPILE=1 (a job of its own), uncompiled
# otherwise; uncompiled on PyTorch.
JIT = BACKEND == "tensorflow" and os.environ.get("RINGLET_TEST_JIT_COMPILE") == "1"
COMPILE = {} if BACKEND == "jax" else {"jit_compile": JIT}
only_tensorflow = pytest.mark.skipif(BACKEND != "tensorflow",
                                     reason="TensorFlow's own (tf.function, XLA)")


@pytest.fixture
def rk3():
    hvd.init()
    yield hvd
    hvd.barrier()
    hvd.shutdown()


def test_keras3_is_served(rk3):
    assert keras.__version__.split(".")[0] == "3"
    assert issubclass(hvd.callbacks.BroadcastGlobalVariablesCallback, keras.callbacks.Callback)
    assert hvd.DistributedOptimizer.__module__ == "ringlet.keras.keras3.api"
    assert type(hvd.allreduce(keras.ops.ones((2,)), name="served")) is type(
        keras.ops.ones((2,))), "collectives return the backend's own tensors"
    if BACKEND != "tensorflow":
        return
    import ringlet.tensorflow.keras as tf_hvd
    assert tf_hvd.callbacks is hvd.callbacks
    assert tf_hvd.DistributedOptimizer is hvd.DistributedOptimizer
    assert "tf_keras" not in sys.modules
    with pytest.raises(ImportError, match="ringlet.keras.elastic serves tf-keras only"):
        import ringlet.keras.elastic  # noqa: F401


def every_rank(hvd, array, name):
    """Every rank's ``array``, stacked in rank order."""
    return np.asarray(hvd.allgather(np.asarray(array, np.float32)[None], name=name))


def mnist_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(10, activation="softmax")])


def mnist_data(rank, samples=64):
    rng = np.random.default_rng(100 + rank)
    return (rng.random((samples, 28, 28, 1), dtype=np.float32),
            rng.integers(0, 10, samples).astype(np.int64))


class Logs(keras.callbacks.Callback):
    """A copy of the logs at each epoch's end, where it is placed among the callbacks."""

    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(dict(logs))


def test_fit_with_callbacks_ends_alike_and_averages_metrics(rk3):
    n, r = rk3.size(), rk3.rank()
    model = mnist_model(seed=r)  # different starts: the broadcast makes them one
    opt = rk3.DistributedOptimizer(keras.optimizers.SGD(0.01 * n, momentum=0.9))
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], **COMPILE)
    x, y = mnist_data(r)
    local, averaged = Logs(), Logs()
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[
        rk3.callbacks.BroadcastGlobalVariablesCallback(0),
        local,
        rk3.callbacks.MetricAverageCallback(),
        averaged,
        rk3.callbacks.LearningRateWarmupCallback(0.01 * n, warmup_epochs=1)])
    assert isinstance(model.optimizer, _DistributedOptimizer)
    for i, w in enumerate(model.get_weights() + [v.numpy() for v in opt.variables]):
        every = every_rank(rk3, w, f"fit.weight.{i}")
        assert np.array_equal(every, np.broadcast_to(every[0], every.shape)), i
    for epoch in range(2):
        for key in ("loss", "accuracy"):
            mine = local.epochs[epoch][key]
            every = every_rank(rk3, [mine], f"fit.metric.{epoch}.{key}")[:, 0]
            want = np.float32(every.mean())
            assert averaged.epochs[epoch][key] == pytest.approx(want, rel=1e-6), (epoch, key)
            assert history.history[key][epoch] == pytest.approx(want, rel=1e-6)
            if key == "loss" and n > 1:
                assert len(set(every)) > 1  # the ranks' own losses differ: a real average
    assert history.history["lr"][-1] == pytest.approx(0.01 * n)


@only_tensorflow
def test_xla_compiled_step_reduces_through_xla_kernels(rk3):
    """model.compile(jit_compile=True): the step, the gradients' allreduce
    included, is one XLA program (Ringlet's XLA kernels); the ranks' mean
    gradient is applied. Sparse gradients, which need an allgather, are
    refused by name unless reduced as dense."""
    n, r = rk3.size(), rk3.rank()
    lr = 0.25
    model = linear_model()
    model.compile(optimizer=rk3.DistributedOptimizer(keras.optimizers.SGD(lr)),
                  loss=linear_loss, jit_compile=True)
    model.fit(np.full((2, 2), r + 1.0, np.float32), np.zeros((2, 1), np.float32),
              batch_size=2, epochs=2, verbose=0)
    assert model.jit_compile
    mean = sum(k + 1.0 for k in range(n)) / n
    assert np.allclose(model.layers[0].kernel.numpy(), -2 * lr * mean, rtol=1e-6, atol=0)

    for sparse_as_dense in (False, True):
        fit_one_lookup(rk3, sparse_as_dense, jit_compile=True)


def linear_loss(y_true, y_pred):
    """The prediction itself: its gradient in the kernel is the batch's mean input."""
    return ops.mean(y_pred, axis=-1)


def linear_model():
    model = keras.Sequential([keras.Input((2,)),
                              keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")])
    return model


class Kernels(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.after_batch, self.iterations = [], []

    def on_train_batch_end(self, batch, logs=None):
        self.after_batch.append(self.model.layers[0].kernel.numpy()[0, 0])
        self.iterations.append(int(self.model.optimizer.iterations.numpy()))


@pytest.mark.parametrize("average,run_eagerly", [(False, False), (True, True)])
def test_backward_passes_per_step_applies_every_second_batch(rk3, average, run_eagerly):
    n, r = rk3.size(), rk3.rank()
    lr = 0.125
    model = linear_model()
    model.compile(optimizer=rk3.DistributedOptimizer(
        keras.optimizers.SGD(lr), backward_passes_per_step=2,
        average_aggregated_gradients=average), loss=linear_loss, run_eagerly=run_eagerly,
        **COMPILE)
    x = np.full((8, 2), r + 1.0, np.float32)  # this rank's gradient: r + 1 in each entry
    kernels = Kernels()
    model.fit(x, np.zeros((8, 1), np.float32), batch_size=2, epochs=1, shuffle=False,
              verbose=0, callbacks=[kernels])
    mean_gradient = sum(k + 1.0 for k in range(n)) / n
    applied = lr * mean_gradient * (1 if average else 2)  # a round's sum, or its mean
    want = [0.0, -applied, -applied, -2 * applied]
    assert np.allclose(kernels.after_batch, want, rtol=1e-6, atol=0), kernels.after_batch
    assert kernels.iterations == [1, 2, 3, 4]  # every pass counts


@pytest.mark.parametrize("settings", [
    {"op": hvd.Average}, {"op": hvd.Sum}, {"gradient_predivide_factor": 2.0},
    {"compression": hvd.Compression.fp16}])
def test_reduction_arguments(rk3, settings):
    n, r = rk3.size(), rk3.rank()
    lr = 0.25
    model = linear_model()
    model.compile(optimizer=rk3.DistributedOptimizer(keras.optimizers.SGD(lr), **settings),
                  loss=linear_loss, **COMPILE)
    model.fit(np.full((2, 2), r + 1.0, np.float32), np.zeros((2, 1), np.float32),
              batch_size=2, epochs=1, verbose=0)
    total = sum(k + 1.0 for k in range(n))
    reduced = total if settings.get("op") is hvd.Sum else total / n
    assert np.allclose(model.layers[0].kernel.numpy(), -lr * reduced, rtol=1e-6, atol=0)


def test_partial_distributed_optimizer_keeps_local_layers_local(rk3):
    n, r = rk3.size(), rk3.rank()
    lr = 0.5
    model = linear_model()
    opt = rk3.PartialDistributedOptimizer(keras.optimizers.SGD(lr),
                                          local_layers=model.layers[0])
    model.compile(optimizer=opt, loss=linear_loss, **COMPILE)
    model.fit(np.full((2, 2), r + 1.0, np.float32), np.zeros((2, 1), np.float32),
              batch_size=2, epochs=1, verbose=0)
    # Not averaged: this rank's own gradient, divided by the ranks' number.
    assert np.allclose(model.layers[0].kernel.numpy(), -lr * (r + 1.0) / n, rtol=1e-6, atol=0)


def fit_one_lookup(rk3, sparse_as_dense, jit_compile):
    """Rank r looks up row r only: its gradient is one row (on TensorFlow
    IndexedSlices, dense elsewhere), 1/2 in each of its two entries; averaged, each
    looked-up row moves by 1/(2n). XLA-compiled, sparse gradients (an allgather,
    which XLA cannot compile) are refused by name unless reduced as dense."""
    n, r = rk3.size(), rk3.rank()
    model = keras.Sequential([keras.Input((1,), dtype="int32"),
                              keras.layers.Embedding(4, 2, embeddings_initializer="zeros")])
    model.compile(optimizer=rk3.DistributedOptimizer(keras.optimizers.SGD(1.0),
                                                     sparse_as_dense=sparse_as_dense),
                  loss=linear_loss, **({} if BACKEND == "jax" else {"jit_compile": jit_compile}))
    data = (np.array([[r]], np.int32), np.zeros((1, 1, 2), np.float32))
    if BACKEND == "tensorflow" and jit_compile and not sparse_as_dense:
        with pytest.raises(RuntimeError, match="sparse_as_dense=True"):
            model.fit(*data, batch_size=1, verbose=0)
        return
    model.fit(*data, batch_size=1, verbose=0)
    want = np.zeros((4, 2), np.float32)
    want[:n] = -1.0 / (2 * n)
    assert np.allclose(model.layers[0].embeddings.numpy(), want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_gradients(rk3, sparse_as_dense):
    fit_one_lookup(rk3, sparse_as_dense, JIT)


def test_learning_rate_schedule(rk3):
    model = linear_model()
    model.compile(optimizer=rk3.DistributedOptimizer(keras.optimizers.SGD(1.0)),
                  loss=linear_loss, **COMPILE)
    seen = []

    class Rates(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            seen.append(float(self.model.optimizer.learning_rate.numpy()))

    x = np.zeros((4, 2), np.float32)  # no gradient: the rates are all that changes
    model.fit(x, np.zeros((4, 1), np.float32), batch_size=2, epochs=3, verbose=0, callbacks=[
        rk3.callbacks.LearningRateScheduleCallback(0.5, 0.1, start_epoch=1), Rates()])
    assert np.allclose(seen, [1.0, 1.0, 0.5, 0.5, 0.05, 0.05], rtol=1e-6)


@only_tensorflow
def test_custom_loop_with_distributed_gradient_tape(rk3):
    import ringlet.tensorflow as rtf
    import tensorflow as tf
    n, r = rk3.size(), rk3.rank()
    keras.utils.set_random_seed(r)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    rk3.broadcast_variables(model.variables, root_rank=0)
    start = model.layers[0].kernel.numpy().copy()
    opt = keras.optimizers.SGD(0.5)
    x = tf.constant(np.full((3, 2), r + 1.0, np.float32))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x))
        tape = rtf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply(grads, model.trainable_variables)
        return grads[0]

    grad = step().numpy()
    mean_gradient = sum(k + 1.0 for k in range(n)) / n
    assert np.allclose(grad, mean_gradient, rtol=1e-6)
    assert np.allclose(model.layers[0].kernel.numpy(), start - 0.5 * mean_gradient, rtol=1e-6)
    every = every_rank(rk3, model.layers[0].kernel.numpy(), "loop.kernel")
    assert np.array_equal(every, np.broadcast_to(every[0], every.shape))


def dense_without_bias(rk3):
    """A Dense(1) layer whose kernel starts random on each rank and is then rank 0's."""
    keras.utils.set_random_seed(rk3.rank())
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    rk3.broadcast_variables(model.variables, root_rank=0)
    return model, model.layers[0].kernel.numpy().copy()


@pytest.mark.skipif(BACKEND != "torch", reason="PyTorch's own loop")
def test_custom_loop_on_torch(rk3):
    import torch
    n, r = rk3.size(), rk3.rank()
    model, start = dense_without_bias(rk3)
    opt = rk3.DistributedOptimizer(keras.optimizers.SGD(0.5))
    loss = torch.mean(model(torch.full((3, 2), r + 1.0)))
    loss.backward()
    grads = [v.value.grad for v in model.trainable_variables]
    assert np.allclose(grads[0].numpy(), r + 1.0)  # this rank's own
    with torch.no_grad():
        opt.apply(grads, model.trainable_variables)
    mean_gradient = sum(k + 1.0 for k in range(n)) / n
    assert np.allclose(model.layers[0].kernel.numpy(), start - 0.5 * mean_gradient, rtol=1e-6)


@pytest.mark.skipif(BACKEND != "jax", reason="JAX's own loop")
def test_custom_loop_on_jax_in_jit(rk3):
    """Keras's stateless calls inside the program's own jax.jit: the reduction runs
    inside the compiled step, every run of it."""
    import jax
    import jax.numpy as jnp
    n, r = rk3.size(), rk3.rank()
    model, start = dense_without_bias(rk3)
    opt = rk3.DistributedOptimizer(keras.optimizers.SGD(0.5))
    opt.build(model.trainable_variables)

    def loss_of(trainable, non_trainable, x):
        y, _ = model.stateless_call(trainable, non_trainable, x)
        return jnp.mean(y)

    @jax.jit
    def step(trainable, non_trainable, optimizer_state, x):
        grads = jax.grad(loss_of)(trainable, non_trainable, x)
        trainable, optimizer_state = opt.stateless_apply(optimizer_state, grads, trainable)
        return trainable, optimizer_state, grads

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    optimizer_state = [v.value for v in opt.variables]
    x = jnp.full((3, 2), r + 1.0)
    mean_gradient = sum(k + 1.0 for k in range(n)) / n
    for run in range(1, 3):
        trainable, optimizer_state, grads = step(trainable, non_trainable, optimizer_state, x)
        assert np.allclose(np.asarray(grads[0]), r + 1.0)  # this rank's own
        assert np.allclose(np.asarray(trainable[0]), start - run * 0.5 * mean_gradient,
                           rtol=1e-6), run


def test_collectives_on_keras_tensors(rk3):
    n, r = rk3.size(), rk3.rank()
    value = ops.full((2, 3), float(r + 1))
    assert np.allclose(ops.convert_to_numpy(rk3.allreduce(value, name="k3.avg")),
                       sum(k + 1.0 for k in range(n)) / n)
    assert np.allclose(ops.convert_to_numpy(rk3.allreduce(value, op=rk3.Sum, name="k3.sum")),
                       sum(k + 1.0 for k in range(n)))
    gathered = ops.convert_to_numpy(rk3.allgather(value, name="k3.gather"))
    assert np.array_equal(gathered, np.repeat(np.arange(1.0, n + 1), 2)[:, None] * np.ones(3))
    variable = keras.Variable(np.full((3,), float(r), np.float32))
    got = ops.convert_to_numpy(rk3.broadcast(variable, n - 1, name="k3.bcast"))
    assert np.array_equal(got, np.full((3,), n - 1.0))
    rk3.broadcast_variables([variable], root_rank=n - 1)
    assert np.array_equal(variable.numpy(), np.full((3,), n - 1.0))


def test_checkpoint_saved_on_rank_0_loads_distributed(rk3, tmp_path):
    n, r = rk3.size(), rk3.rank()
    path = rk3.broadcast_object(str(tmp_path / "best.keras"), root_rank=0)
    model = mnist_model(seed=0)
    model.compile(optimizer=rk3.DistributedOptimizer(keras.optimizers.Adam(0.001)),
                  loss="sparse_categorical_crossentropy", **COMPILE)
    checkpoint = rk3.callbacks.BestModelCheckpoint(monitor="loss")
    checkpoint.filepath = path
    x, y = mnist_data(r, samples=32)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[
        rk3.callbacks.BroadcastGlobalVariablesCallback(0), rk3.callbacks.MetricAverageCallback()]
        + ([checkpoint] if r == 0 else []))
    rk3.barrier()
    loaded = rk3.load_model(path)
    assert isinstance(loaded.optimizer, _DistributedOptimizer)
    assert type(loaded.optimizer).__name__ == "Adam"
    assert int(loaded.optimizer.iterations.numpy()) == 2
    for got, want in zip(loaded.get_weights(), model.get_weights()):
        assert np.array_equal(got, want)
    # Training goes on from there, the ranks together.
    loaded.fit(x, y, batch_size=16, epochs=1, verbose=0)
    for i, w in enumerate(loaded.get_weights()):
        every = every_rank(rk3, w, f"loaded.weight.{i}")
        assert np.array_equal(every, np.broadcast_to(every[0], every.shape)), i
    # The file names Keras's own class: it loads without Ringlet too.
    plain = keras.models.load_model(path)
    assert isinstance(plain.optimizer, keras.optimizers.Adam)  # the backend's own Adam
    assert not isinstance(plain.optimizer, _DistributedOptimizer)


def _import_in_a_new_process(code, **environment):
    env = dict(os.environ, **environment)
    for name in ("RINGLET_RANK", "RINGLET_SIZE", "HOROVOD_RANK", "HOROVOD_SIZE"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


@only_tensorflow
def test_xla_step_without_xla_kernels_is_refused_by_name():
    """An install whose op library has no XLA kernels (here the ops turned off:
    the py_function path) refuses an XLA-compiled step while it is traced,
    naming the fix (rank 0 runs a one-rank job of its own)."""
    if os.environ.get("RINGLET_RANK", "0") != "0":
        pytest.skip("rank 0 runs the new process for the job")
    code = """
import keras, numpy as np
import ringlet.keras as hvd
hvd.init()
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse",
              jit_compile=True)
model.fit(np.ones((2, 2), np.float32), np.ones((2, 1), np.float32), verbose=0)
"""
    done = _import_in_a_new_process(code, RINGLET_TENSORFLOW_OPS="0", KERAS_BACKEND="tensorflow")
    assert done.returncode != 0
    assert "have no XLA kernels. Compile the model with model.compile(..., jit_compile=False)" \
        in done.stderr, done.stderr[-2000:]


def test_unserved_backend_is_named_at_import():
    """Another Keras 3 backend is refused at import, naming it and the versions seen
    (rank 0 runs the new process: no collectives here)."""
    if os.environ.get("RINGLET_RANK", "0") != "0":
        pytest.skip("rank 0 runs the new process for the job")
    # Keras's numpy backend: a real one, and light to import.
    other = _import_in_a_new_process("import ringlet.keras", KERAS_BACKEND="numpy")
    assert other.returncode != 0
    assert ("ImportError: ringlet.keras serves Keras 3 on the jax, tensorflow, torch "
            "backends only") in other.stderr, other.stderr[-2000:]
    assert "'numpy' backend" in other.stderr
    assert f"keras {keras.__version__}, tensorflow " in other.stderr
