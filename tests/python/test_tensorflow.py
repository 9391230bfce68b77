"""ringlet.tensorflow, eager and inside tf.function: the collectives against
results computed here, the gradient rules, DistributedGradientTape and
broadcast_variables as the seed training step uses them, and errors. The
build runs this suite once on the op library and once on the py_function
path (RINGLET_TENSORFLOW_OPS=0)."""

import os

import numpy as np
import pytest

import ringlet.tensorflow  # noqa: F401  (selects the Keras 2 API before tf.keras is used)
import tensorflow as tf

DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.uint8, tf.int16,
          tf.uint16, tf.int32, tf.int64]


def input_of(rank, shape, dtype):
    n = int(np.prod(shape))
    return tf.cast(tf.reshape(tf.range(n) % 7 + rank + 1, shape), dtype)


def everyone(rt, shape, dtype):
    return np.stack([input_of(r, shape, tf.float64).numpy() for r in range(rt.size())])


# Every dtype eagerly; inside tf.function (a trace each, seconds apiece) the
# three kinds: a float, bfloat16 (reduced as float32) and an integer.
@pytest.mark.parametrize("dtype,graph", [(d, False) for d in DTYPES] + [
    (tf.float32, True), (tf.bfloat16, True), (tf.int64, True)],
    ids=lambda v: v.name if hasattr(v, "name") else ("tf.function" if v else "eager"))
def test_allreduce(rtf, dtype, graph):
    x = input_of(rtf.rank(), (2, 3), dtype)
    all_inputs = everyone(rtf, (2, 3), dtype)

    def ops(x):
        return (rtf.allreduce(x, op=rtf.Sum), rtf.allreduce(x, op=rtf.Max),
                rtf.allreduce(x, op=rtf.Average))

    run = tf.function(ops) if graph else ops
    total, high, mean = run(x)
    tol = 5e-2 if dtype in (tf.float16, tf.bfloat16) else 1e-6
    assert total.dtype == dtype and total.shape == (2, 3)
    assert np.allclose(total.numpy().astype(np.float64), all_inputs.sum(0), rtol=tol)
    assert np.allclose(high.numpy().astype(np.float64), all_inputs.max(0))
    want_mean = all_inputs.mean(0) if dtype.is_floating else np.floor(all_inputs.mean(0))
    assert np.allclose(mean.numpy().astype(np.float64), want_mean, rtol=tol)


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_allgather_broadcast_alltoall_reducescatter(rtf, graph):
    n, r = rtf.size(), rtf.rank()

    def ops(rows, ints, flags):
        return (rtf.allgather(rows), rtf.broadcast(ints, n - 1), rtf.allgather(flags),
                rtf.alltoall(tf.repeat(tf.range(n), 2), splits=[2] * n),
                rtf.reducescatter(tf.ones([n, 2]) * float(r + 1), op=rtf.Sum))

    run = tf.function(ops) if graph else ops
    rows = tf.fill([r + 1, 2], float(r))
    gathered, bcast, flags, (a2a, received), rs = run(rows, tf.constant([r, r], tf.int64),
                                                     tf.constant([r % 2 == 0]))
    assert gathered.numpy().tolist() == [[float(q)] * 2 for q in range(n) for _ in range(q + 1)]
    assert bcast.numpy().tolist() == [n - 1] * 2
    assert flags.numpy().tolist() == [q % 2 == 0 for q in range(n)]
    assert a2a.numpy().tolist() == [r] * (2 * n) and received.numpy().tolist() == [2] * n
    assert np.allclose(rs.numpy(), sum(range(1, n + 1))) and rs.shape == (1, 2)


def test_grouped_allreduce_and_scales(rtf):
    xs = [tf.ones([3]) * (rtf.rank() + 1), tf.ones([2, 2], tf.float64)]
    a, b = rtf.grouped_allreduce(xs, op=rtf.Sum, postscale_factor=0.5)
    assert np.allclose(a.numpy(), 0.5 * sum(range(1, rtf.size() + 1)))
    assert np.allclose(b.numpy(), 0.5 * rtf.size())


def test_gradient_rules(rtf):
    """Horovod's gradient of every collective (horovod/tensorflow/mpi_ops.py). Each rank
    weights the outputs it differentiates by w[r], so that the gradients coming back
    tell whose they are."""
    n, r = rtf.size(), rtf.rank()
    w = [float(q + 1) for q in range(n)]
    mean_w = sum(w) / n
    rows = [q + 1 for q in range(n)]  # rank q has q + 1 rows of `mine`
    start = sum(rows[:r])
    mine = tf.Variable(tf.ones([rows[r], 2]))
    even = tf.Variable(tf.ones([2 * n, 2]))  # two rows for (and from) every rank
    uneven = tf.Variable(tf.ones([sum(rows), 2]))  # rows[j] rows for rank j
    by_row = tf.reshape(tf.range(1, sum(rows) + 1, dtype=tf.float32), [-1, 1]) * w[r]
    with tf.GradientTape(persistent=True) as tape:
        losses = {
            "allreduce_sum": rtf.allreduce(uneven, op=rtf.Sum, prescale_factor=0.5,
                                           postscale_factor=0.25) * w[r],
            "allreduce_average": rtf.allreduce(uneven, op=rtf.Average) * w[r],
            "allgather": rtf.allgather(mine) * by_row,
            "broadcast": rtf.broadcast(even, n - 1) * w[r],
            "alltoall": rtf.alltoall(uneven, splits=rows)[0] * w[r],
            "alltoall_even": rtf.alltoall(even) * w[r],
            # the last two rows are past the splits: never sent, no gradient
            "alltoall_short": rtf.alltoall(even, splits=[2] * (n - 1) + [0])[0] * w[r],
            "reducescatter_sum": rtf.reducescatter(even, op=rtf.Sum) * w[r],
            "reducescatter_average": rtf.reducescatter(even, op=rtf.Average, prescale_factor=0.5,
                                                       postscale_factor=0.25) * w[r],
        }
        g_sum = rtf.grouped_allreduce([uneven, even], op=rtf.Sum)
        losses["grouped_allreduce"] = [g_sum[0] * w[r], g_sum[1] * 2 * w[r]]
        g_gather = rtf.grouped_allgather([mine, mine * 3])
        losses["grouped_allgather"] = [g_gather[0] * by_row, g_gather[1] * by_row]
        g_scatter = rtf.grouped_reducescatter([even, even * 3], op=rtf.Sum)
        losses["grouped_reducescatter"] = [g_scatter[0] * w[r], g_scatter[1] * w[r]]
        losses = {key: tf.add_n([tf.reduce_sum(t) for t in tf.nest.flatten(value)])
                  for key, value in losses.items()}

    own_rows = np.arange(start + 1, start + rows[r] + 1, dtype=np.float64)[:, None]
    blocks_even = np.repeat(w, 2)[:, None]  # row block j came from, or went to, rank j
    blocks_uneven = np.repeat(w, rows)[:, None]
    expected = {
        # the same reduction of the incoming gradients, scales included
        ("allreduce_sum", "uneven"): np.full((sum(rows), 2), 0.5 * 0.25 * sum(w)),
        ("allreduce_average", "uneven"): np.full((sum(rows), 2), mean_w),
        # this rank's rows of the incoming gradients averaged over the ranks
        ("allgather", "mine"): own_rows * mean_w * np.ones((1, 2)),
        # the average at the root, zero elsewhere
        ("broadcast", "even"): np.full((2 * n, 2), mean_w if r == n - 1 else 0.0),
        # each row's gradient comes back from the rank it went to
        ("alltoall", "uneven"): blocks_uneven * np.ones((1, 2)),
        ("alltoall_even", "even"): blocks_even * np.ones((1, 2)),
        ("alltoall_short", "even"): np.concatenate([blocks_even[:-2], np.zeros((2, 1))])
        * np.ones((1, 2)),
        # the gradients gathered, times the set's size for Sum, times the scales
        ("reducescatter_sum", "even"): n * blocks_even * np.ones((1, 2)),
        ("reducescatter_average", "even"): 0.5 * 0.25 * blocks_even * np.ones((1, 2)),
        ("grouped_allreduce", "uneven"): np.full((sum(rows), 2), sum(w)),
        ("grouped_allreduce", "even"): np.full((2 * n, 2), 2 * sum(w)),
        ("grouped_allgather", "mine"): 4 * own_rows * mean_w * np.ones((1, 2)),
        ("grouped_reducescatter", "even"): 4 * n * blocks_even * np.ones((1, 2)),
    }
    variables = {"mine": mine, "even": even, "uneven": uneven}
    for (key, var), want in expected.items():
        got = tape.gradient(losses[key], variables[var]).numpy()
        assert np.array_equal(got, want), (key, var, got)


def test_seed_training_step(rtf):
    """The seed's tf.function step, as written there but for the import."""
    hvd = rtf
    tf.random.set_seed(hvd.rank())  # different initial weights on every rank
    mnist_model = tf.keras.Sequential([
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax")])
    loss = tf.losses.SparseCategoricalCrossentropy()
    opt = tf.optimizers.Adam(0.001 * hvd.size())

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            probs = mnist_model(images, training=True)
            loss_value = loss(labels, probs)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss_value, mnist_model.trainable_variables)
        opt.apply_gradients(zip(grads, mnist_model.trainable_variables))
        if first_batch:
            hvd.broadcast_variables(mnist_model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables(), root_rank=0)
        return loss_value

    rng = np.random.default_rng(hvd.rank())
    for batch in range(4):
        images = tf.constant(rng.random((8, 28, 28), dtype=np.float32))
        labels = tf.constant(rng.integers(0, 10, 8))
        training_step(images, labels, batch == 0)
    for i, var in enumerate(mnist_model.variables):
        gathered = hvd.allgather(tf.reshape(var, [1, -1]), name=f"check.{i}").numpy()
        assert np.array_equal(gathered, np.repeat(gathered[:1], hvd.size(), 0)), var.name


def test_objects_and_broadcast_variables_eagerly(rtf):
    assert rtf.broadcast_object({"r": rtf.rank()}, root_rank=0) == {"r": 0}
    assert rtf.allgather_object(rtf.rank()) == list(range(rtf.size()))
    v = tf.Variable(tf.fill([2], float(rtf.rank())))
    rtf.broadcast_variables([v], root_rank=rtf.size() - 1)
    assert v.numpy().tolist() == [float(rtf.size() - 1)] * 2


def test_the_expected_collective_path_runs(rtf):
    from ringlet.tensorflow import ops
    expected = os.environ.get("RINGLET_TEST_EXPECT_TENSORFLOW_OPS")
    if expected is None:
        pytest.skip("RINGLET_TEST_EXPECT_TENSORFLOW_OPS is not set (the build's ctest sets it)")
    assert (ops.library is not None) == (expected == "1")


def test_errors(rtf):
    """Failures raise what horovod.tensorflow raises (its ops' status: the controller's
    error response for ranks that disagree is a precondition failure, a wrong call an
    invalid argument), and Ringlet's own class too, as the other frameworks raise it."""
    from ringlet.common import exceptions
    n, r = rtf.size(), rtf.rank()
    with pytest.raises(tf.errors.FailedPreconditionError, match="'allreduce.shapes'") as shapes:
        rtf.allreduce(tf.ones([2 + r]), name="shapes")
    assert isinstance(shapes.value, exceptions.MismatchError)
    assert isinstance(shapes.value, rtf.HorovodInternalError) and shapes.value.code == 7
    with pytest.raises(tf.errors.FailedPreconditionError, match="'allgather.types'"):
        rtf.allgather(tf.ones([2], tf.int32 if r % 2 == 0 else tf.float32), name="types")
    with pytest.raises(tf.errors.FailedPreconditionError, match="'broadcast.roots'"):
        rtf.broadcast(tf.ones([3]), r, name="roots")
    # Every rank's splits ask for more rows than it has: refused when the op runs.
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than the first dimension"):
        rtf.alltoall(tf.ones([n - 1]), splits=[1] * n)
    with pytest.raises(tf.errors.InvalidArgumentError, match="split evenly"):
        rtf.alltoall(tf.ones([n + 1]))
    sparse = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0]), tf.constant([2, 2]))
    with pytest.raises(NotImplementedError, match="Sum and Average"):
        rtf.allreduce(sparse, op=rtf.Max)
    with pytest.raises(NotImplementedError, match="Pre/postscale"):
        rtf.allreduce(sparse, op=rtf.Sum, prescale_factor=2.0)
    with pytest.raises(NotImplementedError, match="Pre/postscale"):
        rtf.grouped_allreduce([sparse, tf.ones([2])], postscale_factor=0.5)

    @tf.function
    def mismatched():
        return rtf.allreduce(tf.ones([2 + r]), name="graph_shapes")

    # In a graph: Horovod's FailedPrecondition from the op library; the py_function
    # path's ops can only carry a Python exception that is not a ValueError as
    # UnknownError.
    from ringlet.tensorflow import ops
    in_graph = (tf.errors.FailedPreconditionError if ops.library is not None
                else tf.errors.UnknownError)
    with pytest.raises(in_graph, match="graph_shapes"):
        mismatched()
    with pytest.raises(ValueError, match="not supported"):
        rtf.allreduce(tf.constant([True, False]))
    with pytest.raises(ValueError, match="string has no fixed element size"):
        rtf.allgather(tf.constant(["a", "b"]))
    with pytest.raises(ValueError, match="string has no fixed element size"):
        rtf.broadcast(tf.constant(["a"]), 0)
    with pytest.raises(NotImplementedError):
        rtf.allreduce(tf.ones([2]), op=rtf.Adasum)
    assert np.allclose(rtf.allreduce(tf.ones([2]), op=rtf.Sum).numpy(), n)

    rtf.barrier()
    rtf.shutdown()
    try:
        with pytest.raises(tf.errors.FailedPreconditionError) as stopped:
            rtf.allreduce(tf.ones([2]))
        assert isinstance(stopped.value, exceptions.NotInitializedError)
        with pytest.raises(tf.errors.FailedPreconditionError):
            rtf.rank_op()
    finally:
        rtf.init()


def test_horovod_names_signatures_and_results(rtf):
    """horovod.tensorflow's names beyond the collectives above, with its argument
    order and return types."""
    n, r = rtf.size(), rtf.rank()
    x = tf.fill([2], float(r))
    # allgather(tensor, name, ignore_name_scope, process_set), broadcast(tensor, root_rank,
    # name, ignore_name_scope, process_set), grouped_allreduce(..., process_set,
    # ignore_name_scope, name)
    gathered = rtf.allgather(x, "positional_gather", False, rtf.global_process_set)
    assert gathered.numpy().tolist() == [float(q) for q in range(n) for _ in range(2)]
    assert rtf.broadcast(x, n - 1, "positional_bcast", False,
                         rtf.global_process_set).numpy().tolist() == [float(n - 1)] * 2
    (summed,) = rtf.grouped_allreduce([x], None, "", "", rtf.Compression.none, rtf.Sum, 1.0, 1.0,
                                      rtf.global_process_set, False, "positional_group")
    assert summed.numpy().tolist() == [float(sum(range(n)))] * 2

    # alltoall: the gathered tensor alone without splits; with int64 splits that leave
    # rows unsent, only the rows they cover go.
    alone = rtf.alltoall(tf.range(2 * n))
    assert isinstance(alone, tf.Tensor) and alone.numpy().tolist() == [2 * r, 2 * r + 1] * n
    out, received = rtf.alltoall(tf.range(3 * n), splits=tf.constant([2] * n, tf.int64))
    assert out.numpy().tolist() == [2 * r, 2 * r + 1] * n
    assert received.dtype == tf.int32 and received.numpy().tolist() == [2] * n

    # Empty tensors: a rank that sends nothing, and receives nothing.
    nothing, received = rtf.alltoall(tf.zeros([0, 2]), splits=[0] * n)
    assert nothing.shape == (0, 2) and received.numpy().tolist() == [0] * n
    assert rtf.broadcast(tf.zeros([0, 3]), 0).shape == (0, 3)

    ints, floats = rtf.grouped_allgather([tf.fill([r + 1], r), tf.fill([1, 2], float(r))])
    assert ints.numpy().tolist() == [q for q in range(n) for _ in range(q + 1)]
    assert floats.numpy().tolist() == [[float(q)] * 2 for q in range(n)]
    rows, flat = rtf.grouped_reducescatter([tf.ones([n, 2]) * (r + 1), tf.ones([2 * n])])
    assert rows.numpy().tolist() == [[(n + 1) / 2] * 2] and flat.numpy().tolist() == [1.0] * 2

    last = rtf.join()
    assert last.dtype == tf.int32 and last.shape == () and 0 <= int(last) < n

    v = tf.Variable(tf.fill([3], float(r)))
    (value,) = rtf.broadcast_([v], n - 1)
    assert v.numpy().tolist() == [float(n - 1)] * 3 and value.numpy().tolist() == [float(n - 1)] * 3

    assert [int(op) for op in (rtf.rank_op(), rtf.size_op(), rtf.local_rank_op(),
                               rtf.local_size_op(), rtf.cross_rank_op(), rtf.cross_size_op(),
                               rtf.process_set_included_op())] == [
        r, n, rtf.local_rank(), rtf.local_size(), rtf.cross_rank(), rtf.cross_size(), 1]
    first = rtf.add_process_set([0])
    assert int(rtf.process_set_included_op(first.process_set_id)) == (1 if r == 0 else 0)
    assert int(rtf.size_op(first.process_set_id)) == 1
    assert int(rtf.size_op(first.process_set_id + 1)) == -3  # unknown set: Horovod's code
    rtf.remove_process_set(first)

    assert rtf.handle_average_backwards_compatibility(None, None) == rtf.Average
    with pytest.warns(DeprecationWarning):
        assert rtf.handle_average_backwards_compatibility(None, False) == rtf.Sum
    assert rtf.check_num_rank_power_of_2(4) and not rtf.check_num_rank_power_of_2(6)
    assert rtf._executing_eagerly() and rtf.util._executing_eagerly()
    assert rtf.refs_to_vars(rtf.vars_to_refs([v, [v]]))[1][0] is v
    # fp16 compression's context is the dtype, as Horovod's, whatever the dtype
    for dtype, sent in ((tf.int32, tf.int32), (tf.float64, tf.float16)):
        compressed, ctx = rtf.Compression.fp16.compress(tf.ones([2], dtype))
        assert ctx == dtype and compressed.dtype == sent
        assert rtf.Compression.fp16.decompress(compressed, ctx).dtype == dtype
    # DistributedOptimizer: a Keras optimizer stays one (ringlet.keras wraps it)
    keras_sgd = rtf.DistributedOptimizer(tf.keras.optimizers.SGD(0.1))
    assert isinstance(keras_sgd, tf.keras.optimizers.SGD)
    assert not isinstance(keras_sgd, tf.compat.v1.train.Optimizer)


def test_distributed_gradient_tape_options(rtf):
    """register_local_source and scale_local_gradients, PartialDistributedGradientTape,
    groups and use_generic_names, as Horovod's tape takes them."""
    n, r = rtf.size(), rtf.rank()
    w = [float(q + 1) for q in range(n)]
    shared = tf.Variable(tf.ones([2]))
    local = tf.Variable(tf.ones([2]))
    layer = tf.keras.layers.Dense(1, kernel_initializer="ones", use_bias=False)
    layer.build((None, 2))

    def loss():
        return (tf.reduce_sum(shared * w[r]) + tf.reduce_sum(local * w[r])
                + tf.reduce_sum(layer(tf.ones([1, 2])) * w[r]))

    with tf.GradientTape() as tape:
        value = loss()
    tape = rtf.DistributedGradientTape(tape, groups=1)
    tape.register_local_source(local)
    g_shared, g_local = tape.gradient(value, [shared, local])
    assert g_shared.numpy().tolist() == [sum(w) / n] * 2
    assert g_local.numpy().tolist() == [np.float32(w[r]) / np.float32(n)] * 2  # kept, scaled

    with tf.GradientTape() as tape:
        value = loss()
    tape = rtf.PartialDistributedGradientTape(tape, op=rtf.Sum, local_layers=layer,
                                              scale_local_gradients=False)
    local_pairs, shared_pairs = tape.get_local_and_global_gradients(value,
                                                                    [shared, layer.kernel])
    assert local_pairs[0][0] is layer.kernel
    assert local_pairs[0][1].numpy().tolist() == [[w[r]], [w[r]]]
    assert shared_pairs[0][1].numpy().tolist() == [sum(w)] * 2

    with tf.GradientTape() as tape:
        value = loss()
    tape = rtf.DistributedGradientTape(tape, groups=[[local, shared]])
    grads = tape.gradient(value, [shared, local, layer.kernel], use_generic_names=True)
    assert [g.numpy().ravel().tolist() for g in grads] == [[sum(w) / n] * 2] * 3
    with pytest.warns(DeprecationWarning):
        rtf.DistributedGradientTape(tf.GradientTape(), num_groups=2)
    with pytest.raises(ValueError, match="groups should be"):
        rtf.DistributedGradientTape(tf.GradientTape(), groups=-1)
    with pytest.raises(ValueError, match="tf.keras.layers.Layer"):
        rtf.PartialDistributedGradientTape(tf.GradientTape(), local_layers=[shared])


def test_two_tapes_and_name_scopes_in_one_function(rtf):
    """Collectives of one name in two name scopes, and two tapes' reductions, are
    distinct collectives even when they run at once (as in Horovod)."""
    n, r = rtf.size(), rtf.rank()
    a, b = tf.Variable(tf.ones([2])), tf.Variable(tf.ones([3]))

    @tf.function
    def step(weight):
        with tf.GradientTape() as first:
            first_loss = tf.reduce_sum(a * weight)
        with tf.GradientTape() as second:
            second_loss = tf.reduce_sum(b * weight)
        ga = rtf.DistributedGradientTape(first).gradient(first_loss, [a])[0]
        gb = rtf.DistributedGradientTape(second).gradient(second_loss, [b])[0]
        with tf.name_scope("first"):
            sa = rtf.allreduce(a * weight, name="same", op=rtf.Sum)
        with tf.name_scope("second"):
            sb = rtf.allreduce(b * weight, name="same", op=rtf.Sum)
        return ga, gb, sa, sb

    ga, gb, sa, sb = step(tf.constant(float(r + 1)))
    mean_w, sum_w = (n + 1) / 2, n * (n + 1) / 2
    assert ga.numpy().tolist() == [mean_w] * 2 and gb.numpy().tolist() == [mean_w] * 3
    assert sa.numpy().tolist() == [sum_w] * 2 and sb.numpy().tolist() == [sum_w] * 3


def test_sync_batch_normalization(rtf):
    """Training statistics over every rank's batch: the same outputs and moving
    statistics as batch normalization of all the batches together, in numpy."""
    n, r = rtf.size(), rtf.rank()
    batches = [np.array([[q, q + 1], [2 * q, 2 * q + 3], [3 * q, -q], [4 * q, q * q]],
                        np.float32) for q in range(n)]
    layer = rtf.SyncBatchNormalization()
    out = layer(tf.constant(batches[r]), training=True).numpy()
    everything = np.concatenate(batches).astype(np.float64)
    mean, var = everything.mean(0), everything.var(0)
    assert np.allclose(out, (batches[r] - mean) / np.sqrt(var + layer.epsilon), atol=1e-5)
    assert np.allclose(layer.moving_mean.numpy(), (1 - layer.momentum) * mean, atol=1e-6)
    assert np.allclose(layer.moving_variance.numpy(),
                       layer.momentum + (1 - layer.momentum) * var, atol=1e-5)
    with pytest.raises(ValueError, match="fused"):
        rtf.SyncBatchNormalization(fused=True)


@pytest.mark.parametrize("elastic", ["1", "0"])
def test_an_elastic_jobs_graphs_read_the_size_when_they_run(rtf, monkeypatch, elastic):
    """A tf.function traced in one round of an elastic job may run in a later one
    of another size. Here it is traced while the size reads 7 and run at the real
    one: in an elastic job (HOROVOD_ELASTIC=1) the sparse average, the local
    gradients' scaling (DistributedGradientTape, the Keras DistributedOptimizer)
    and SyncBatchNormalization divide by the size read when the graph runs;
    elsewhere, as in Horovod, by the size read while tracing."""
    import tf_keras
    from ringlet import _ringlet
    import ringlet.keras as hvd_keras

    monkeypatch.setenv("HOROVOD_ELASTIC", elastic)
    n, r = rtf.size(), rtf.rank()
    local = tf.Variable(1.0)
    layer = rtf.SyncBatchNormalization()
    layer.build(tf.TensorShape([None, 1]))
    optimizer = hvd_keras.DistributedOptimizer(tf_keras.optimizers.SGD(0.1))
    optimizer.register_local_var(local)

    @tf.function
    def step(rank):
        rows = tf.IndexedSlices(tf.ones([1, 1]), tf.constant([0]), tf.constant([1, 1]))
        sparse = tf.reduce_sum(rtf.allreduce(rows, op=rtf.Average).values)
        normalized = layer(tf.fill([2, 1], tf.cast(rank, tf.float32)), training=True)[0, 0]
        with tf.GradientTape() as tape:
            loss = local * 3.0
        tape = rtf.DistributedGradientTape(tape)
        tape.register_local_source(local)
        tape_grad = tape.gradient(loss, [local])[0]
        with tf.GradientTape() as keras_tape:
            keras_loss = local * 5.0
        keras_grad = optimizer.compute_gradients(keras_loss, [local], tape=keras_tape)[0][0]
        return sparse, normalized, tape_grad, keras_grad

    with monkeypatch.context() as tracing:
        tracing.setattr(_ringlet, "size", lambda: 7)
        tracing.setattr(_ringlet, "process_set_size", lambda set_id: 7)
        concrete = step.get_concrete_function(tf.constant(0))
    sparse, normalized, tape_grad, keras_grad = (float(v) for v in concrete(tf.constant(r)))
    size = n if elastic == "1" else 7
    assert abs(sparse - n / size) < 1e-6
    assert abs(tape_grad - 3.0 / size) < 1e-6 and abs(keras_grad - 5.0 / size) < 1e-6
    if elastic == "1":
        mean = (n - 1) / 2  # rank q's batch is all q
        variance = sum(q * q for q in range(n)) / n - mean * mean
        assert abs(normalized - (r - mean) / np.sqrt(variance + layer.epsilon)) < 1e-4


@pytest.fixture
def rtf_short_stalls(rtf, monkeypatch):
    """ringlet.tensorflow whose runtime fails a collective that some ranks never submit
    after 20 s: collectives the ranks name differently fail the test instead of
    hanging it."""
    rtf.barrier()
    rtf.shutdown()
    monkeypatch.setenv("RINGLET_STALL_TIMEOUT_SECONDS", "20")
    rtf.init()
    return rtf


def wire_names(graph_def):
    """The names the op library's collectives in ``graph_def`` (and in the functions
    it holds: branches, loop bodies) go on the wire with."""
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    names = []
    for node in nodes:
        if node.op.startswith("Ringlet") and "tensor_names" in node.attr:
            names += [s.decode() for s in node.attr["tensor_names"].list.s]
        elif node.op.startswith("Ringlet") and "tensor_name" in node.attr:
            names.append(node.attr["tensor_name"].s.decode())
    return names


def test_a_function_one_rank_traces_anew_keeps_its_collective_names(rtf_short_stalls):
    """A training step that rank 0 alone traces anew (its batch has another shape)
    names its unnamed collectives as the others' older trace does: after their
    inputs, as Horovod names them, so the step completes instead of stalling."""
    from ringlet.tensorflow import ops
    rtf = rtf_short_stalls
    n, r = rtf.size(), rtf.rank()
    w = tf.Variable(tf.ones([3]))

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.reduce_sum(batch, 0) * w)
        grad = rtf.DistributedGradientTape(tape, op=rtf.Sum).gradient(loss, [w])[0]
        return grad, rtf.allgather(batch), rtf.allreduce(tf.reduce_sum(batch), op=rtf.Sum)

    step(tf.ones([2, 3]))
    rows = [4] + [2] * (n - 1)
    grad, gathered, total = step(tf.fill([rows[r], 3], float(r + 1)))
    assert step.experimental_get_tracing_count() == (2 if r == 0 else 1)
    want = sum(rows[q] * (q + 1) for q in range(n))  # d loss / d w = the batch's column sums
    assert grad.numpy().tolist() == [want] * 3
    assert gathered.numpy().tolist() == [[q + 1.0] * 3 for q in range(n) for _ in range(rows[q])]
    assert float(total) == 3 * want
    if ops.library is not None:  # the two traces' ops carry the same names
        traces = [step.get_concrete_function(tf.TensorSpec([k, 3])).graph.as_graph_def()
                  for k in (2, 4)]
        assert wire_names(traces[0]) == wire_names(traces[1])
        assert len(wire_names(traces[0])) == 3


def test_unnamed_collectives_in_one_function_are_distinct(rtf):
    """Two collectives of one input, two groups of the same tensors, and collectives
    in two branches are distinct collectives, as TensorFlow's op names are distinct
    in a graph."""
    from ringlet.tensorflow import ops
    n, r = rtf.size(), rtf.rank()

    @tf.function
    def f(x, flag):
        y = x * 2
        total, high = rtf.allreduce(x, op=rtf.Sum), rtf.allreduce(x, op=rtf.Max)
        pair_sum = rtf.grouped_allreduce([x, y], op=rtf.Sum)
        pair_min = rtf.grouped_allreduce([x, y], op=rtf.Min)
        two = tf.cond(flag, lambda: rtf.allreduce(tf.ones([2]) * float(r + 1), op=rtf.Sum),
                      lambda: tf.zeros([2]))
        three = tf.cond(flag, lambda: rtf.allreduce(tf.ones([3]) * float(10 * (r + 1)),
                                                    op=rtf.Sum),
                        lambda: tf.zeros([3]))
        return total, high, pair_sum, pair_min, two, three

    x = tf.fill([2], float(r + 1))
    total, high, pair_sum, pair_min, two, three = f(x, tf.constant(True))
    s = n * (n + 1) / 2
    assert total.numpy().tolist() == [s] * 2 and high.numpy().tolist() == [n] * 2
    assert [t.numpy().tolist() for t in pair_sum] == [[s] * 2, [2 * s] * 2]
    assert [t.numpy().tolist() for t in pair_min] == [[1.0] * 2, [2.0] * 2]
    assert two.numpy().tolist() == [s] * 2 and three.numpy().tolist() == [10 * s] * 3
    if ops.library is not None:
        names = wire_names(f.get_concrete_function(x, tf.constant(True)).graph.as_graph_def())
        assert len(names) == 8 and len(set(names)) == 8, names
        assert "allreduce.noname.x_0" in names  # after the input, as Horovod's


def test_barrier_runs_at_once_and_refuses_a_function(rtf):
    """barrier() waits for the others when called, eagerly and in tf.compat.v1 code;
    in a tf.function it would run while tracing, so it raises."""
    @tf.function
    def inside():
        rtf.barrier()
        return tf.constant(1)

    with pytest.raises(RuntimeError, match="inside a tf.function"):
        inside()
    with tf.Graph().as_default():
        rtf.barrier()
    rtf.barrier()


def test_the_py_function_path_waits_for_every_collective_of_a_failed_call(rtf, monkeypatch):
    """When one collective of a call fails, the call still waits for the others, so
    that none is left in the core's table (or in ringlet.common.handles') with its
    buffers held; then it raises the failure."""
    from ringlet import _ringlet
    from ringlet import numpy as np_ops
    from ringlet.common import exceptions
    from ringlet.common import handles as common_handles
    from ringlet.tensorflow import pyfunc
    n, r = rtf.size(), rtf.rank()
    issued = []
    for module, function in ((_ringlet, "allreduce_async"), (_ringlet, "reducescatter_async"),
                             (np_ops, "_allgather_named")):
        def recording(*args, real=getattr(module, function)):
            issued.append(real(*args))
            return issued[-1]
        monkeypatch.setattr(module, function, recording)

    # Each call: a first collective whose shapes or dtypes differ between ranks, then
    # one every rank agrees on.
    with pytest.raises(exceptions.MismatchError, match="waits.reduce_bad"):
        pyfunc.allreduce([tf.ones([2 + r]), tf.ones([2], tf.int32)],
                         ["waits.reduce_bad", "waits.reduce_good"], _ringlet.OP_SUM, 1.0, 1.0, 0)
    with pytest.raises(exceptions.MismatchError, match="waits.scatter_bad"):
        pyfunc.reducescatter([tf.ones([n * (2 + r)]), tf.ones([n])],
                             ["waits.scatter_bad", "waits.scatter_good"], _ringlet.OP_SUM,
                             1.0, 1.0, 0)
    with pytest.raises(exceptions.MismatchError, match="waits.gather_bad"):
        pyfunc.allgather([tf.ones([1], tf.int32 if r % 2 == 0 else tf.float32), tf.ones([1])],
                         ["waits.gather_bad", "waits.gather_good"], 0)
    assert len(issued) == 6
    for handle in issued:
        assert handle not in common_handles._in_flight
        with pytest.raises(exceptions.InvalidArgumentError, match="unknown handle"):
            _ringlet.poll(handle)


def test_objects_cross_with_cloudpickle(rtf):
    """broadcast_object and allgather_object take what cloudpickle takes (a lambda, a
    local class), as Horovod's do."""
    n, r = rtf.size(), rtf.rank()

    class Local:
        def __init__(self, rank):
            self.rank = rank

    got = rtf.broadcast_object(lambda x: 10 * x + r, root_rank=n - 1)
    assert got(1) == 10 + n - 1
    gathered = rtf.allgather_object(Local(r))
    assert [type(g).__name__ for g in gathered] == ["Local"] * n
    assert [g.rank for g in gathered] == list(range(n))


def test_collectives_inside_an_xla_compiled_function(rtf):
    """tf.function(jit_compile=True): allreduce (alone and grouped, every
    reducible dtype), broadcast and broadcast_variables run through the op
    library's XLA kernels,
    three steps of the same compiled program, against values worked out here."""
    from ringlet.tensorflow import ops
    if os.environ.get("RINGLET_TEST_EXPECT_XLA_KERNELS") == "1":  # the build made them
        assert ops.has_xla_kernels()
    elif not ops.has_xla_kernels():
        pytest.skip("this job's op library has no XLA kernels (the py_function path, or a "
                    "build without tf2xla's headers)")
    n, r = rtf.size(), rtf.rank()
    dtypes = [tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int32, tf.int64]

    @tf.function(jit_compile=True)
    def step(x, scale):
        summed = [rtf.allreduce(tf.cast(x, d) * tf.cast(scale, d), op=rtf.Sum, name=f"xla.{i}")
                  for i, d in enumerate(dtypes)]
        averaged = rtf.allreduce(x * scale, op=rtf.Average, name="xla.avg")
        grouped = rtf.grouped_allreduce([x, x * 2.0], op=rtf.Sum)
        root = n - 1
        from_root = rtf.broadcast(x * 10.0 + scale, root_rank=root, name="xla.bcast")
        return summed, averaged, grouped, from_root

    variables = [tf.Variable([float(r), 2.0 * r]), tf.Variable(float(r + 5))]

    @tf.function(jit_compile=True)
    def broadcast_variables():
        rtf.broadcast_variables(variables, root_rank=n - 1)
        return variables[0].read_value()

    broadcast_variables()
    np.testing.assert_array_equal(variables[0].numpy(), [n - 1.0, 2.0 * (n - 1)])
    assert variables[1].numpy() == n + 4.0

    x = tf.constant([1.0, 2.0, 3.0]) + r
    for s in range(3):
        summed, averaged, grouped, from_root = step(x, tf.constant(float(s + 1)))
        every = np.stack([np.array([1.0, 2.0, 3.0]) + q for q in range(n)])
        for d, got in zip(dtypes, summed):
            assert got.dtype == d
            np.testing.assert_allclose(got.numpy().astype(np.float64), every.sum(0) * (s + 1),
                                       rtol=1e-2 if d in (tf.float16, tf.bfloat16) else 1e-6)
        np.testing.assert_allclose(averaged.numpy(), every.mean(0) * (s + 1), rtol=1e-6)
        np.testing.assert_allclose(grouped[0].numpy(), every.sum(0), rtol=1e-6)
        np.testing.assert_allclose(grouped[1].numpy(), 2 * every.sum(0), rtol=1e-6)
        np.testing.assert_allclose(from_root.numpy(), every[n - 1] * 10.0 + s + 1, rtol=1e-6)

    if n > 1:  # ranks that disagree: every rank's step fails, naming the tensor
        @tf.function(jit_compile=True)
        def mismatched():
            return rtf.allreduce(tf.ones([r + 1]), op=rtf.Sum, name="xla.mismatch")

        # A mismatch is a precondition failure, as in the eager kernels (Horovod's).
        with pytest.raises(tf.errors.FailedPreconditionError, match=r"ringlet: allreduce of 'allreduce.xla.mismatch' on "
                           rf"rank {r} failed in an XLA-compiled function: .*shape"):
            mismatched()
