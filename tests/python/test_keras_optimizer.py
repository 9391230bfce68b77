"""ringlet.keras's DistributedOptimizer and PartialDistributedOptimizer as
Horovod's: gradients reduced in compute_gradients, local variables,
backward_passes_per_step with local variables and with gradients that are
not finite; eager and inside tf.function, with tf.keras's optimizers and
the legacy ones. Every rank r computes gradients that are multiples of
r + 1, so the average over n ranks is the same multiple of (n + 1) / 2."""

import numpy as np
import pytest

import ringlet.keras  # noqa: F401  (tf-keras, as the job chooses: TF_USE_LEGACY_KERAS=1)
import tensorflow as tf


FAMILIES = {"optimizer": tf.keras.optimizers.SGD, "legacy": tf.keras.optimizers.legacy.SGD}
family = pytest.mark.parametrize("kind", list(FAMILIES))
mode = pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])


def maybe_traced(fn, graph):
    return tf.function(fn) if graph else fn


def close(got, want):
    return np.allclose(np.asarray(got, np.float64), want, rtol=1e-6, atol=0)


@family
@mode
def test_compute_gradients_reduces_and_apply_gradients_applies_as_given(rk, kind, graph):
    n, r = rk.size(), rk.rank()
    mean = (n + 1) / 2
    w = tf.Variable([1.0, 2.0])
    opt = rk.DistributedOptimizer(FAMILIES[kind](0.5))

    def loss():
        return (r + 1.0) * tf.reduce_sum(w)

    def step():
        pairs = opt.compute_gradients(loss, [w])
        opt.apply_gradients(pairs)
        return pairs[0][0]

    assert close(maybe_traced(step, graph)(), [mean, mean])
    assert close(w.numpy(), [1.0 - 0.5 * mean, 2.0 - 0.5 * mean])

    def minimize():
        opt.minimize(loss, [w])

    maybe_traced(minimize, graph)()
    assert close(w.numpy(), [1.0 - mean, 2.0 - mean])
    # Gradients that did not come through compute_gradients are applied as they are.
    opt.apply_gradients([(tf.constant([r + 1.0, 0.0]), w)])
    assert close(w.numpy(), [1.0 - mean - 0.5 * (r + 1), 2.0 - mean])


@mode
@pytest.mark.parametrize("scale", [True, False], ids=["scaled", "unscaled"])
def test_register_local_var_keeps_its_gradient_local(rk, graph, scale):
    n, r = rk.size(), rk.rank()
    local, shared, table = tf.Variable([0.0]), tf.Variable([0.0]), tf.Variable([0.0, 0.0])
    opt = rk.DistributedOptimizer(tf.keras.optimizers.SGD(1.0), scale_local_gradients=scale)
    opt.register_local_var(local)
    opt.register_local_var(table)

    def grads():
        def loss():  # table's gradient is sparse (tf.IndexedSlices), row 1 only
            rows = tf.gather(table, [1])
            return (r + 1.0) * (tf.reduce_sum(local) + tf.reduce_sum(shared) +
                                tf.reduce_sum(rows))
        pairs = opt.compute_gradients(loss, [local, shared, table])
        return [pairs[0][0], pairs[1][0], tf.convert_to_tensor(pairs[2][0])]

    g_local, g_shared, g_table = maybe_traced(grads, graph)()
    own = (r + 1.0) / n if scale else r + 1.0
    assert close(g_local, [own])
    assert close(g_shared, [(n + 1) / 2])
    assert close(g_table, [0.0, own])


@mode
@pytest.mark.parametrize("local_count", [0, 1, 2])
def test_partial_distributed_optimizer_keeps_local_layers_local(rk, graph, local_count):
    """Two dense layers of ones: out = w2 . (w1 x + b1) + b2 with x = (1, 2, 3), so
    d out / d w1[i][j] = x[i], d b1 = 1, d w2[j] = sum(x) = 6, d b2 = 1."""
    n, r = rk.size(), rk.rank()
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(2, input_shape=(3,), kernel_initializer="ones"),
        tf.keras.layers.Dense(1, kernel_initializer="ones")])
    x = tf.constant([[1.0, 2.0, 3.0]])
    per_unit = [np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]), np.array([1.0, 1.0]),
                np.array([[6.0], [6.0]]), np.array([1.0])]
    local_layers = model.layers[:local_count]
    opt = rk.PartialDistributedOptimizer(tf.keras.optimizers.SGD(0.25),
                                         local_layers=local_layers)

    def gradients():
        with tf.GradientTape() as tape:
            loss = (r + 1.0) * tf.reduce_sum(model(x))
        pairs = opt.compute_gradients(loss, model.trainable_variables, tape=tape)
        return [g for g, _ in pairs]

    # Applied apart: in one tf.function, TensorFlow may update a bias whose gradient
    # is ready before the forward pass has read it.
    grads = maybe_traced(gradients, graph)()
    opt.apply_gradients(zip(grads, model.trainable_variables))
    local_vars = {v.ref() for layer in local_layers for v in layer.trainable_weights}
    initial = [np.ones((3, 2)), np.zeros(2), np.ones((2, 1)), np.zeros(1)]
    for var, g, unit, start in zip(model.trainable_variables, grads, per_unit, initial):
        factor = (r + 1.0) / n if var.ref() in local_vars else (n + 1) / 2
        assert close(g, factor * unit), (var.name, g.numpy(), factor)
        assert close(var.numpy(), start - 0.25 * factor * unit)


def test_partial_distributed_optimizer_takes_one_layer(rk):
    n, r = rk.size(), rk.rank()
    layer = tf.keras.layers.Dense(1, kernel_initializer="ones", use_bias=False)
    layer.build((None, 1))
    opt = rk.PartialDistributedOptimizer(tf.keras.optimizers.SGD(1.0), local_layers=layer)
    ((g, _),) = opt.compute_gradients(
        lambda: (r + 1.0) * tf.reduce_sum(layer(tf.ones((1, 1)))), layer.trainable_weights)
    assert close(g, [[(r + 1.0) / n]])


@family
@mode
@pytest.mark.parametrize("average", [False, True], ids=["summed", "averaged"])
def test_aggregation_with_local_variables(rk, kind, graph, average):
    """Three passes a round, seven passes: pass k's gradient is k (r + 1) for both
    variables. Within a round the passes get this rank's running sums; the third
    gets the round's sum reduced (the local variable's divided by n instead), over
    3 when averaged, and applies it with learning rate 1."""
    n, r = rk.size(), rk.rank()
    passes = 3
    shared, local = tf.Variable([0.0]), tf.Variable([0.0])
    opt = rk.DistributedOptimizer(FAMILIES[kind](1.0), backward_passes_per_step=passes,
                                  average_aggregated_gradients=average)
    opt.register_local_var(local)

    def step(k):
        pairs = opt.compute_gradients(
            lambda: k * (r + 1.0) * (tf.reduce_sum(shared) + tf.reduce_sum(local)),
            [shared, local])
        opt.apply_gradients(pairs)
        return [g for g, _ in pairs]

    step = maybe_traced(step, graph)
    want_shared = want_local = 0.0
    round_sum = 0.0  # of k over the round's passes so far
    for k in range(1, 8):
        g_shared, g_local = step(tf.constant(float(k)))
        round_sum += k
        divisor = passes if average else 1
        if k % passes == 0:
            reduced_shared = round_sum * (n + 1) / 2 / divisor
            reduced_local = round_sum * (r + 1) / n / divisor
            assert close(g_shared, [reduced_shared]) and close(g_local, [reduced_local]), k
            want_shared -= reduced_shared
            want_local -= reduced_local
            round_sum = 0.0
        else:
            own = round_sum * (r + 1)
            assert close(g_shared, [own]) and close(g_local, [own]), k
        assert close(shared.numpy(), [want_shared]) and close(local.numpy(), [want_local]), k
        assert int(opt.iterations.numpy()) == k
        assert int(opt._agg_helper.counter.numpy()) == k % passes


@family
@mode
@pytest.mark.parametrize("average", [False, True], ids=["summed", "averaged"])
def test_aggregation_with_an_infinite_gradient(rk, kind, graph, average):
    """An infinite gradient in the first round: that round's update is applied as it
    is (the variable becomes -inf), the count and the sums start again from zero, and
    the second round's gradients are finite."""
    n, r = rk.size(), rk.rank()
    a, b = tf.Variable([0.0]), tf.Variable([0.0])
    opt = rk.DistributedOptimizer(FAMILIES[kind](1.0), backward_passes_per_step=2,
                                  average_aggregated_gradients=average)

    def step(scale):
        pairs = opt.compute_gradients(
            lambda: scale * tf.reduce_sum(a) + (r + 1.0) * tf.reduce_sum(b), [a, b])
        opt.apply_gradients(pairs)
        return [g for g, _ in pairs]

    step = maybe_traced(step, graph)
    divisor = 2 if average else 1
    g_a, _ = step(tf.constant(float("inf")))
    assert g_a.numpy().tolist() == [float("inf")]
    g_a, g_b = step(tf.constant(1.0))
    assert g_a.numpy().tolist() == [float("inf")]
    assert close(g_b, [2 * (n + 1) / 2 / divisor])
    assert a.numpy().tolist() == [float("-inf")]
    assert close(b.numpy(), [-2 * (n + 1) / 2 / divisor])
    assert int(opt._agg_helper.counter.numpy()) == 0 and int(opt.iterations.numpy()) == 2
    g_a, g_b = step(tf.constant(1.0))  # a new round: this rank's own gradients
    assert g_a.numpy().tolist() == [1.0] and close(g_b, [r + 1.0])
    g_a, g_b = step(tf.constant(1.0))
    assert close(g_a, [2.0 / divisor]) and close(g_b, [2 * (n + 1) / 2 / divisor])
    assert close(b.numpy(), [-4 * (n + 1) / 2 / divisor])
    assert int(opt._agg_helper.counter.numpy()) == 0 and int(opt.iterations.numpy()) == 4


def test_aggregation_takes_sparse_gradients_only_as_dense(rk):
    n, r = rk.size(), rk.rank()
    table = tf.Variable([0.0, 0.0])

    def loss():
        return (r + 1.0) * tf.reduce_sum(tf.gather(table, [1]))

    opt = rk.DistributedOptimizer(tf.keras.optimizers.SGD(1.0), backward_passes_per_step=2)
    with pytest.raises(ValueError, match="sparse_as_dense"):
        opt.compute_gradients(loss, [table])
    opt = rk.DistributedOptimizer(tf.keras.optimizers.SGD(1.0), backward_passes_per_step=2,
                                  sparse_as_dense=True)
    ((g, _),) = opt.compute_gradients(loss, [table])
    assert close(g, [0.0, r + 1.0])
    ((g, _),) = opt.compute_gradients(loss, [table])
    assert close(g, [0.0, 2 * (n + 1) / 2])


def test_fit_applies_every_second_batch(rk):
    """model.fit's train steps with backward_passes_per_step=2: the weights change on
    the second batch only, the same on every rank."""
    n, r = rk.size(), rk.rank()
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,),
                                                       kernel_initializer="ones")])
    opt = rk.DistributedOptimizer(tf.keras.optimizers.SGD(0.1), backward_passes_per_step=2)
    model.compile(optimizer=opt, loss="mse")
    x = np.array([[1.0, r + 1.0]], np.float32)
    y = np.array([[0.0]], np.float32)
    before = model.get_weights()
    model.train_on_batch(x, y)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), before))
    model.train_on_batch(x, y)
    after = model.get_weights()
    assert not np.array_equal(after[0], before[0])
    gathered = rk.allgather(after[0].reshape(1, -1)).numpy()
    assert np.array_equal(gathered, np.repeat(gathered[:1], n, 0))
    model.train_on_batch(x, y)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), after))
    assert int(opt.iterations.numpy()) == 3 and int(opt._agg_helper.counter.numpy()) == 1


@pytest.mark.parametrize("average", [False, True], ids=["summed", "averaged"])
def test_aggregation_in_a_graph(rk, average):
    """tf.compat.v1 Keras (a model built and trained in a graph, in Keras's session)
    with backward_passes_per_step=2 and the bias a local variable: the second batch
    applies the two passes' sums, the kernel's averaged over the ranks and the
    bias's divided by their number; the first and third batches apply nothing."""
    n, r = rk.size(), rk.rank()
    divisor = 2 if average else 1
    with tf.Graph().as_default():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,),
                                                           kernel_initializer="ones")])
        opt = rk.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.1),
                                      backward_passes_per_step=2,
                                      average_aggregated_gradients=average)
        opt.register_local_var(model.layers[0].bias)
        model.compile(optimizer=opt, loss="mse")
        x = np.array([[1.0, r + 1.0]], np.float32)
        y = np.array([[0.0]], np.float32)
        weights = [model.get_weights()]
        for _ in range(3):
            model.train_on_batch(x, y)
            weights.append(model.get_weights())
        counts = tf.keras.backend.batch_get_value([opt.iterations, opt._agg_helper.counter])
    tf.keras.backend.clear_session()

    # d/dw (w.x + b)^2 = 2 (w.x + b) x, at w = (1, 1), b = 0: 2 (q + 2) (1, q + 1) on rank q.
    def kernel_grad(q):
        return 2.0 * (q + 2) * np.array([[1.0], [q + 1.0]])

    kernel = np.ones((2, 1)) - 0.1 * 2 * sum(kernel_grad(q) for q in range(n)) / n / divisor
    bias = np.array([-0.1 * 2 * 2.0 * (r + 2) / n / divisor])
    for got, want in zip(weights[1], weights[0]):
        assert np.array_equal(got, want)
    assert np.allclose(weights[2][0], kernel, rtol=1e-6)
    assert np.allclose(weights[2][1], bias, rtol=1e-6)
    for got, want in zip(weights[3], weights[2]):
        assert np.array_equal(got, want)
    assert counts == [3, 1]
