"""ringlet.keras and ringlet.tensorflow.keras: Horovod's names, signatures and
defaults for both modules, the value collectives, load_model, and model.fit
with DistributedOptimizer and the callbacks."""

import inspect
import warnings

import numpy as np
import pytest

import ringlet.keras as hvd
import ringlet.tensorflow.keras as tf_hvd
import tensorflow as tf

from ringlet.keras.optimizer import _DistributedOptimizer

REQUIRED = inspect.Parameter.empty


# Every public name of horovod.keras and horovod.tensorflow.keras (0.28.1) but
# elastic, which Ringlet does not serve.
HOROVOD_NAMES = [
    "init", "shutdown", "is_initialized", "start_timeline", "stop_timeline", "size",
    "local_size", "cross_size", "rank", "local_rank", "cross_rank", "mpi_threads_supported",
    "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built", "nccl_built", "ddl_built",
    "ccl_built", "cuda_built", "rocm_built", "ProcessSet", "global_process_set",
    "add_process_set", "remove_process_set", "Average", "Sum", "Adasum", "Compression",
    "callbacks", "DistributedOptimizer", "PartialDistributedOptimizer",
    "broadcast_global_variables", "allreduce", "allgather", "broadcast", "reducescatter",
    "load_model"]
HOROVOD_CALLBACKS = ["BroadcastGlobalVariablesCallback", "MetricAverageCallback",
                     "LearningRateScheduleCallback", "LearningRateWarmupCallback",
                     "BestModelCheckpoint"]


def test_both_imports_give_horovods_names_from_one_implementation():
    import ringlet.tensorflow.keras.callbacks as tf_callbacks
    from ringlet.tensorflow.keras.callbacks import MetricAverageCallback
    for name in HOROVOD_NAMES:
        assert hasattr(hvd, name), name
        assert getattr(tf_hvd, name) is getattr(hvd, name), name
    assert tf_callbacks is hvd.callbacks and tf_hvd.callbacks is hvd.callbacks
    assert MetricAverageCallback is hvd.callbacks.MetricAverageCallback
    for name in HOROVOD_CALLBACKS:
        assert isinstance(getattr(hvd.callbacks, name), type), name


def test_the_chosen_tf_keras_is_served():
    """This job chooses tf-keras (TF_USE_LEGACY_KERAS=1, tf_keras imported): its
    callbacks and tf.keras are tf-keras's; Keras 3's module stays unloaded."""
    import sys

    import tf_keras
    assert issubclass(hvd.callbacks.MetricAverageCallback, tf_keras.callbacks.Callback)
    assert tf.keras.Model is tf_keras.Model
    assert "ringlet.keras.keras3" not in sys.modules


def params(fn):
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


def assert_leads_with(fn, expected):
    """``fn`` takes Horovod's parameters in Horovod's order with its defaults; any more
    it takes have defaults."""
    got = params(fn)
    assert got[:len(expected)] == expected, (fn.__qualname__, got)
    assert all(default is not REQUIRED for _, default in got[len(expected):]), got


def test_signatures_and_defaults_are_horovods():
    c, ps = hvd.Compression.none, hvd.global_process_set
    # horovod.tensorflow.keras's order; horovod.keras's keywords are among them.
    assert_leads_with(hvd.DistributedOptimizer, [
        ("optimizer", REQUIRED), ("name", None), ("device_dense", ""), ("device_sparse", ""),
        ("compression", c), ("sparse_as_dense", False), ("gradient_predivide_factor", 1.0),
        ("op", hvd.Average), ("backward_passes_per_step", 1),
        ("average_aggregated_gradients", False), ("num_groups", 0), ("groups", None),
        ("process_set", ps), ("scale_local_gradients", True)])
    assert_leads_with(hvd.PartialDistributedOptimizer, [
        ("optimizer", REQUIRED), ("name", None), ("device_dense", ""), ("device_sparse", ""),
        ("compression", c), ("sparse_as_dense", False), ("gradient_predivide_factor", 1.0),
        ("op", hvd.Average), ("groups", None), ("process_set", ps), ("local_layers", None),
        ("scale_local_gradients", True)])
    assert_leads_with(hvd.broadcast_global_variables, [("root_rank", REQUIRED)])
    assert_leads_with(hvd.allreduce, [
        ("value", REQUIRED), ("name", None), ("average", None), ("prescale_factor", 1.0),
        ("postscale_factor", 1.0), ("op", None), ("compression", c)])
    assert_leads_with(hvd.allgather, [("value", REQUIRED), ("name", None)])
    assert_leads_with(hvd.broadcast, [("value", REQUIRED), ("root_rank", REQUIRED),
                                      ("name", None)])
    assert_leads_with(hvd.reducescatter, [("value", REQUIRED), ("name", None),
                                          ("op", hvd.Average)])
    assert_leads_with(hvd.load_model, [
        ("filepath", REQUIRED), ("custom_optimizers", None), ("custom_objects", None),
        ("compression", c), ("legacy_opts", False)])
    cb = hvd.callbacks
    assert_leads_with(cb.BroadcastGlobalVariablesCallback, [
        ("root_rank", REQUIRED), ("device", ""), ("local_variables", None)])
    assert_leads_with(cb.MetricAverageCallback, [("device", "")])
    assert_leads_with(cb.LearningRateScheduleCallback, [
        ("initial_lr", REQUIRED), ("multiplier", REQUIRED), ("start_epoch", 0),
        ("end_epoch", None), ("staircase", True), ("momentum_correction", True),
        ("steps_per_epoch", None)])
    assert_leads_with(cb.LearningRateWarmupCallback, [
        ("initial_lr", REQUIRED), ("warmup_epochs", 5), ("momentum_correction", True),
        ("steps_per_epoch", None), ("verbose", 0)])
    assert_leads_with(cb.BestModelCheckpoint, [
        ("monitor", "val_loss"), ("verbose", 0), ("save_weights_only", False),
        ("mode", "auto"), ("save_freq", "epoch")])


def test_best_model_checkpoint_keeps_only_the_best():
    checkpoint = hvd.callbacks.BestModelCheckpoint(monitor="loss", mode="min")
    assert checkpoint.save_best_only and checkpoint.monitor == "loss"
    assert checkpoint.filepath is None  # set by whoever runs the training


def test_value_collectives_return_tensors(rk):
    n, r = rk.size(), rk.rank()
    mean = rk.allreduce([1.0 * (r + 1), 2.0])
    assert isinstance(mean, tf.Tensor) and mean.dtype == tf.float32
    assert mean.numpy().tolist() == [(n + 1) / 2, 2.0]
    assert rk.allreduce([r + 1], op=rk.Sum).numpy().tolist() == [n * (n + 1) // 2]
    gathered = rk.allgather([[r, r]])
    assert isinstance(gathered, tf.Tensor)
    assert gathered.numpy().tolist() == [[q, q] for q in range(n)]
    root = n - 1
    assert rk.broadcast([r * 10.0], root).numpy().tolist() == [root * 10.0]
    share = rk.reducescatter(np.full((n, 2), r + 1.0, np.float32), op=rk.Sum)
    assert share.numpy().tolist() == [[n * (n + 1) / 2] * 2]


def test_broadcast_global_variables_is_refused_eagerly(rk):
    with pytest.raises(RuntimeError, match="broadcast_variables"):
        rk.broadcast_global_variables(0)


def test_in_a_graph_the_functions_run_in_the_keras_session(rk):
    """In a tf.compat.v1 graph, as Horovod's Keras functions: the value collectives
    give their values, and broadcast_global_variables assigns the root's values, both
    in Keras's session."""
    n, r = rk.size(), rk.rank()
    root = n - 1
    with tf.Graph().as_default():
        mean = rk.allreduce([1.0 * (r + 1), 2.0])
        gathered = rk.allgather([[r, r]])
        bcast = rk.broadcast([r * 10.0], root)
        share = rk.reducescatter(np.full((n, 2), r + 1.0, np.float32), op=rk.Sum)
        variable = tf.compat.v1.Variable([float(r)] * 2)
        session = tf.compat.v1.keras.backend.get_session()
        session.run(variable.initializer)
        rk.broadcast_global_variables(root)
        after = session.run(variable)
    tf.keras.backend.clear_session()
    assert isinstance(mean, np.ndarray) and mean.tolist() == [(n + 1) / 2, 2.0]
    assert gathered.tolist() == [[q, q] for q in range(n)]
    assert bcast.tolist() == [root * 10.0]
    assert share.tolist() == [[n * (n + 1) / 2] * 2]
    assert after.tolist() == [float(root)] * 2


def test_distributed_optimizer_refuses_what_horovod_refuses(rk):
    for op in (rk.Adasum, rk.Max):
        with pytest.raises(ValueError, match="Average or Sum"):
            rk.DistributedOptimizer(tf.keras.optimizers.SGD(), op=op)
        with pytest.raises(ValueError, match="Average or Sum"):
            rk.PartialDistributedOptimizer(tf.keras.optimizers.SGD(), op=op)
    for groups in (0, -1):
        with pytest.raises(ValueError, match="groups"):
            rk.DistributedOptimizer(tf.keras.optimizers.SGD(), groups=groups)
    with pytest.raises(ValueError, match="local_layers"):
        rk.PartialDistributedOptimizer(tf.keras.optimizers.SGD(), local_layers=["dense"])
    with pytest.warns(DeprecationWarning, match="num_groups"):
        rk.DistributedOptimizer(tf.keras.optimizers.SGD(), num_groups=2)


def test_sum_ignores_the_predivide_factor(rk):
    """Horovod's Keras optimizer splits only an average with the predivide factor."""
    n, r = rk.size(), rk.rank()
    opt = rk.DistributedOptimizer(tf.keras.optimizers.SGD(), op=rk.Sum,
                                  gradient_predivide_factor=4.0)
    w = tf.Variable([0.0])
    ((g, _),) = opt.compute_gradients(lambda: (r + 1.0) * tf.reduce_sum(w), [w])
    assert g.numpy().tolist() == [n * (n + 1) / 2]


def test_distributed_optimizer_keeps_class_and_config(rk):
    opt = rk.DistributedOptimizer(tf.keras.optimizers.Adam(0.01))
    assert isinstance(opt, tf.keras.optimizers.Adam) and type(opt).__name__ == "Adam"
    assert np.isclose(opt.get_config()["learning_rate"], 0.01)
    # Horovod's naming: a legacy optimizer's name becomes Distributed<class>.
    legacy = rk.DistributedOptimizer(tf.keras.optimizers.legacy.Adam(0.01))
    assert legacy.get_config()["name"] == "DistributedAdam"
    named = rk.DistributedOptimizer(tf.keras.optimizers.legacy.Adam(0.01), name="mine")
    assert named.get_config()["name"] == "mine"


@pytest.mark.parametrize("legacy", [False, True], ids=["optimizer", "legacy"])
def test_from_config_gives_a_distributed_optimizer(rk, legacy):
    n, r = rk.size(), rk.rank()
    base = tf.keras.optimizers.legacy.Adam(0.5) if legacy else tf.keras.optimizers.Adam(0.5)
    opt = rk.DistributedOptimizer(base, op=rk.Sum)
    config = opt.get_config()
    for copy in (opt.from_config(config), type(opt).from_config(config)):
        assert copy.get_config() == config
        w = tf.Variable([0.0])
        ((g, _),) = copy.compute_gradients(lambda: (r + 1.0) * tf.reduce_sum(w), [w])
        assert g.numpy().tolist() == [n * (n + 1) / 2]  # summed, as the original


class MySGD(tf.keras.optimizers.SGD):
    """An optimizer class Keras does not know by name."""


def trained_model(optimizer):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer=optimizer, loss="mse")
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    model.fit(x, np.array([[1.0], [2.0]], np.float32), batch_size=1, epochs=1, verbose=0,
              shuffle=False)
    return model


# (A legacy optimizer's slots come back from .keras only when it next applies
# gradients, Keras's own way, so that pair is not among these.)
@pytest.mark.filterwarnings("ignore:You are saving your model as an HDF5 file")
@pytest.mark.parametrize("kind,fmt", [("optimizer", ".h5"), ("optimizer", ".keras"),
                                      ("legacy", ".h5"), ("custom", ".h5"),
                                      ("custom", ".keras")])
def test_load_model_wraps_the_saved_optimizer_with_its_state(rk, tmp_path, kind, fmt):
    make = {"optimizer": tf.keras.optimizers.SGD, "legacy": tf.keras.optimizers.legacy.SGD,
            "custom": MySGD}[kind]
    model = trained_model(rk.DistributedOptimizer(make(0.1, momentum=0.5)))
    saved = [v.numpy() for v in model.optimizer.variables()]
    path = str(tmp_path / f"model{fmt}")
    model.save(path)
    custom = [MySGD] if kind == "custom" else None
    loaded = rk.load_model(path, custom_optimizers=custom, compression=rk.Compression.fp16,
                           legacy_opts=kind == "legacy")
    opt = loaded.optimizer
    assert isinstance(opt, _DistributedOptimizer) and isinstance(opt, make)
    assert type(opt).__name__ == make.__name__
    assert int(opt.iterations.numpy()) == 2  # two batches trained before saving
    assert len(opt.variables()) == len(saved)
    for got, want in zip(opt.variables(), saved):
        assert np.array_equal(got.numpy(), want)
    # fp16 compression: 1.0001 travels as float16, which holds it as 1.0.
    w = tf.Variable([0.0])
    ((g, _),) = opt.compute_gradients(lambda: 1.0001 * tf.reduce_sum(w), [w])
    assert g.numpy().tolist() == [float(np.float16(1.0001))] == [1.0]


@pytest.mark.filterwarnings("ignore:You are saving your model as an HDF5 file")
def test_load_model_without_the_custom_class_fails(rk, tmp_path):
    model = trained_model(rk.DistributedOptimizer(MySGD(0.1)))
    path = str(tmp_path / "model.h5")
    model.save(path)
    with pytest.raises(ValueError, match="MySGD"):
        rk.load_model(path)


def make_data(rank):
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], np.float32))[:, None]
    return x, y


@pytest.mark.parametrize("module", [hvd, tf_hvd], ids=["keras", "tensorflow.keras"])
def test_fit_with_callbacks_trains_the_same_model_everywhere(module):
    module.init()
    try:
        n, r = module.size(), module.rank()
        tf.random.set_seed(r)  # different initial weights: the callback fixes that
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
        opt = module.DistributedOptimizer(tf.keras.optimizers.SGD(0.05 * n, momentum=0.5))
        model.compile(optimizer=opt, loss="mse")
        x, y = make_data(r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            history = model.fit(
                x, y, batch_size=16, epochs=3, verbose=0,
                callbacks=[module.callbacks.BroadcastGlobalVariablesCallback(0),
                           module.callbacks.MetricAverageCallback(),
                           module.callbacks.LearningRateWarmupCallback(0.05 * n,
                                                                       warmup_epochs=2),
                           module.callbacks.LearningRateScheduleCallback(0.05 * n,
                                                                         multiplier=0.5,
                                                                         start_epoch=2)])
        losses = history.history["loss"]
        assert losses[-1] < losses[0]
        # averaged metrics are the same number on every rank
        gathered = module.allgather(np.array([losses[-1]])).numpy()
        assert gathered.tolist() == [losses[-1]] * n
        # epoch 2 is the schedule's first: 0.5 ** 0
        assert np.isclose(history.history["lr"][-1], 0.05 * n)
        for i, w in enumerate(model.get_weights()):
            gathered = module.allgather(w.reshape(1, -1), name=f"w{i}").numpy()
            assert np.array_equal(gathered, np.repeat(gathered[:1], n, 0))
        module.barrier()
    finally:
        module.shutdown()
