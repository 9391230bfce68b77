"""ringlet.jax: every collective on every dtype, outside jax.jit and inside it,
against results computed here from every rank's known input; pytrees whose
leaves differ across ranks; an optax training loop whose ranks agree."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ringlet.common import exceptions  # noqa: E402

jax.config.update("jax_enable_x64", True)  # int64 and float64 leaves stay 64-bit

REDUCIBLE = [jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64, jnp.int8, jnp.uint8, jnp.int16,
             jnp.uint16, jnp.int32, jnp.int64]
MOVED_AS_BYTES = [jnp.bool_, jnp.uint32, jnp.complex64]


def dtype_id(dtype):
    return jnp.dtype(dtype).name


@pytest.fixture
def rj():
    """ringlet.jax, initialized for one test and shut down after it."""
    import ringlet.jax as hvd
    hvd.init()
    yield hvd
    hvd.barrier()
    hvd.shutdown()


def values_of(rank, shape, salt=0):
    """Every rank's input as float64 (small integers, exact in every dtype)."""
    n = int(np.prod(shape))
    return ((np.arange(n) % 7) + rank + 1 + salt).astype(np.float64).reshape(shape)


def input_of(rank, shape, dtype, salt=0):
    values = values_of(rank, shape, salt)
    if jnp.dtype(dtype) == jnp.bool_:
        return jnp.asarray(values.astype(np.int64) % 2 == 0)
    return jnp.asarray(values.astype(jnp.dtype(dtype)))


def as_dtype(values, dtype):
    """Integer values as ``dtype`` (bool: whether even)."""
    if jnp.dtype(dtype) == jnp.bool_:
        return np.asarray(values) % 2 == 0
    return np.asarray(values).astype(jnp.dtype(dtype))


def close(got, want, dtype):
    got = np.asarray(got).astype(np.float64)
    tolerance = 2e-2 if jnp.dtype(dtype).itemsize <= 2 else 1e-6
    return got.shape == np.shape(want) and np.allclose(got, want, rtol=tolerance)


def test_basics(rj):
    assert rj.is_initialized()
    assert rj.size() == int(os.environ["RINGLET_SIZE"])
    assert rj.rank() == int(os.environ["RINGLET_RANK"])
    assert rj.local_rank() == int(os.environ["RINGLET_LOCAL_RANK"])
    assert rj.local_size() == int(os.environ["RINGLET_LOCAL_SIZE"])
    assert rj.cross_rank() == 0 and rj.cross_size() == 1
    assert rj.Average != rj.Sum


def expected_reductions(n, shape, dtype):
    everyone = np.stack([values_of(r, shape) for r in range(n)])
    small = np.stack([values_of(r, shape) % 2 + 1 for r in range(n)])  # products fit int8
    average = everyone.mean(0)
    if not jnp.issubdtype(dtype, jnp.floating):
        average = np.trunc(average)
    return {"Sum": everyone.sum(0), "Average": average, "Min": everyone.min(0),
            "Max": everyone.max(0), "Product": small.prod(0)}


@pytest.mark.parametrize("dtype", REDUCIBLE, ids=dtype_id)
def test_allreduce_every_op_eager_and_jit(rj, dtype):
    shape = (3, 5)
    x = input_of(rj.rank(), shape, dtype)
    small = jnp.asarray((values_of(rj.rank(), shape) % 2 + 1).astype(jnp.dtype(dtype)))
    want = expected_reductions(rj.size(), shape, dtype)
    ops = ["Sum", "Average", "Min", "Max", "Product"]

    def reduce_all(x, small):
        return {op: rj.allreduce(small if op == "Product" else x, op=getattr(rj, op),
                                 name=f"every_op.{op}") for op in ops}

    for results in (reduce_all(x, small), jax.jit(reduce_all)(x, small)):
        for op in ops:
            assert results[op].dtype == jnp.dtype(dtype), op
            assert isinstance(results[op], jax.Array)
            assert close(results[op], want[op], dtype), (op, results[op], want[op])


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float64, jnp.int32],
                         ids=dtype_id)
def test_allreduce_scales(rj, dtype):
    n = rj.size()
    shape = (4,)
    x = input_of(rj.rank(), shape, dtype)
    everyone = np.stack([values_of(r, shape) for r in range(n)])
    if jnp.issubdtype(dtype, jnp.floating):
        pre, post = 0.5, 3.0
        want_sum = post * (pre * everyone).sum(0)
        want_avg = post * (pre * everyone).sum(0) / n
    else:  # integers scale in double, then toward zero
        pre, post = 2.0, 0.5
        want_sum = np.trunc(post * np.trunc(pre * everyone).sum(0))
        want_avg = np.trunc(post / n * np.trunc(pre * everyone).sum(0))

    def scaled(x):
        return (rj.allreduce(x, op=rj.Sum, prescale_factor=pre, postscale_factor=post,
                             name="scaled.sum"),
                rj.allreduce(x, op=rj.Average, prescale_factor=pre, postscale_factor=post,
                             name="scaled.avg"))

    for got_sum, got_avg in (scaled(x), jax.jit(scaled)(x)):
        assert close(got_sum, want_sum, dtype) and close(got_avg, want_avg, dtype)


def test_grouped_allreduce_pytree(rj):
    n = rj.size()
    tree = {"w": input_of(rj.rank(), (2, 3), jnp.float32),
            "layers": [input_of(rj.rank(), (4,), jnp.bfloat16), input_of(rj.rank(), (), jnp.int32)]}
    want_w = np.stack([values_of(r, (2, 3)) for r in range(n)]).sum(0)
    want_b = np.stack([values_of(r, (4,)) for r in range(n)]).sum(0)
    want_s = sum(values_of(r, ()) for r in range(n))
    for f in (lambda t: rj.grouped_allreduce(t, op=rj.Sum, name="tree"),
              jax.jit(lambda t: rj.grouped_allreduce(t, op=rj.Sum, name="tree"))):
        got = f(tree)
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(tree)
        assert close(got["w"], want_w, jnp.float32)
        assert got["layers"][0].dtype == jnp.bfloat16 and close(got["layers"][0], want_b,
                                                                   jnp.bfloat16)
        assert got["layers"][1].dtype == jnp.int32 and int(got["layers"][1]) == want_s
    # a list, unnamed, averaged
    a, b = rj.grouped_allreduce([jnp.ones(3) * (rj.rank() + 1), jnp.ones(2)])
    assert np.allclose(a, (n + 1) / 2) and np.allclose(b, 1.0)


@pytest.mark.parametrize("dtype", REDUCIBLE + MOVED_AS_BYTES, ids=dtype_id)
def test_allgather_eager_and_jit(rj, dtype):
    n, r = rj.size(), rj.rank()
    # outside jit the ranks' row counts differ
    x = input_of(r, (r + 1, 2), dtype)
    got = rj.allgather(x, name="rows")
    want = np.concatenate([np.asarray(input_of(q, (q + 1, 2), dtype)) for q in range(n)])
    assert got.dtype == jnp.dtype(dtype) and np.array_equal(np.asarray(got), want)
    # inside it every rank passes as many rows
    y = input_of(r, (2, 3), dtype)
    got = jax.jit(lambda y: rj.allgather(y, name="even_rows"))(y)
    want = np.concatenate([np.asarray(input_of(q, (2, 3), dtype)) for q in range(n)])
    assert got.dtype == jnp.dtype(dtype) and np.array_equal(np.asarray(got), want)


@pytest.mark.parametrize("dtype", REDUCIBLE + MOVED_AS_BYTES, ids=dtype_id)
def test_broadcast_eager_and_jit(rj, dtype):
    n, r = rj.size(), rj.rank()
    x = input_of(r, (2, 3), dtype)
    want = np.asarray(input_of(n - 1, (2, 3), dtype))
    for f in (lambda x: rj.broadcast(x, n - 1, name="from_last"),
              jax.jit(lambda x: rj.broadcast(x, n - 1, name="from_last"))):
        got = f(x)
        assert got.dtype == jnp.dtype(dtype) and np.array_equal(np.asarray(got), want)
    assert np.array_equal(np.asarray(x), np.asarray(input_of(r, (2, 3), dtype)))  # untouched


@pytest.mark.parametrize("dtype", REDUCIBLE + MOVED_AS_BYTES, ids=dtype_id)
def test_alltoall_eager_and_jit(rj, dtype):
    n, r = rj.size(), rj.rank()
    # outside jit: rank r sends j + 1 rows to rank j, each row [r, j]
    splits = [j + 1 for j in range(n)]
    rows = np.concatenate([np.tile([r, j], (j + 1, 1)) for j in range(n)])
    out, received = rj.alltoall(jnp.asarray(as_dtype(rows, dtype)), splits=splits,
                                name="uneven")
    want = as_dtype(np.concatenate([np.tile([q, r], (r + 1, 1)) for q in range(n)]), dtype)
    assert received.tolist() == [r + 1] * n
    assert out.dtype == jnp.dtype(dtype) and np.array_equal(np.asarray(out), want)
    # inside jit: as many rows received as sent (two to each rank), with and without splits
    y = jnp.asarray(as_dtype(np.repeat(np.arange(n), 2), dtype))  # two rows of j to rank j
    want = as_dtype(np.full(2 * n, r), dtype)
    even = jax.jit(lambda y: rj.alltoall(y, name="even"))(y)
    split, received = jax.jit(lambda y: rj.alltoall(y, splits=[2] * n, name="split"))(y)
    assert np.array_equal(np.asarray(even), want) and np.array_equal(np.asarray(split), want)
    assert np.asarray(received).tolist() == [2] * n


@pytest.mark.parametrize("dtype", REDUCIBLE, ids=dtype_id)
def test_reducescatter_eager_and_jit(rj, dtype):
    n, r = rj.size(), rj.rank()
    rows = n + 1  # the first member holds two rows, the others one
    x = input_of(r, (rows, 2), dtype)
    everyone = np.stack([values_of(q, (rows, 2)) for q in range(n)])
    start = 0 if r == 0 else r + 1
    share = 2 if r == 0 else 1
    want_sum = everyone.sum(0)[start:start + share]
    want_avg = everyone.mean(0)[start:start + share]
    if not jnp.issubdtype(dtype, jnp.floating):
        want_avg = np.trunc(want_avg)

    def scatter(x):
        return (rj.reducescatter(x, op=rj.Sum, name="rs.sum"),
                rj.reducescatter(x, name="rs.avg"))

    for got_sum, got_avg in (scatter(x), jax.jit(scatter)(x)):
        assert got_sum.dtype == jnp.dtype(dtype)
        assert close(got_sum, want_sum, dtype) and close(got_avg, want_avg, dtype)


def test_broadcast_parameters(rj):
    r = rj.rank()
    params = {"dense": {"w": input_of(r, (3, 2), jnp.float32),
                        "b": input_of(r, (2,), jnp.bfloat16)},
              "step": jnp.asarray(r, jnp.int32), "mask": input_of(r, (4,), jnp.bool_)}
    want = {"dense": {"w": input_of(0, (3, 2), jnp.float32), "b": input_of(0, (2,), jnp.bfloat16)},
            "step": jnp.asarray(0, jnp.int32), "mask": input_of(0, (4,), jnp.bool_)}
    for f in (lambda p: rj.broadcast_parameters(p, root_rank=0),
              jax.jit(lambda p: rj.broadcast_parameters(p, root_rank=0))):
        got = f(params)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            assert g.dtype == w.dtype and np.array_equal(np.asarray(g), np.asarray(w))


def test_different_pytree_names_the_leaf_on_every_rank(rj):
    r = rj.rank()
    tree = {"dense": {"w": jnp.ones((2, 2)), "b": jnp.ones(2)}}
    if r == 1:
        tree["extra"] = jnp.ones(3)
    with pytest.raises(exceptions.MismatchError, match=r"leaf 'extra' is missing on rank"):
        rj.grouped_allreduce(tree, name="odd_tree")
    # a leaf of another shape on one rank
    tree = {"dense": {"w": jnp.ones((2, 2)), "b": jnp.ones(3 if r == 1 else 2)}}
    with pytest.raises(exceptions.MismatchError,
                       match=r"leaf 'dense\.b' is float(32|64)\[2\] on rank.*\[3\] on rank 1"):
        rj.broadcast_parameters(tree, root_rank=0)
    # inside jit the callback's error carries the same words
    tree = [jnp.ones(2)] * (3 if r == 1 else 2)
    with pytest.raises(Exception, match=r"leaf '2' is missing on rank"):
        jax.jit(lambda t: rj.grouped_allreduce(t, name="jit_tree"))(tree)
    # and the job goes on
    assert float(rj.allreduce(jnp.ones(1), op=rj.Sum, name="after")[0]) == rj.size()


def test_reduction_of_other_dtypes_refused(rj):
    with pytest.raises(exceptions.InvalidArgumentError, match="has dtype bool, which is not"):
        rj.allreduce(jnp.ones(2, jnp.bool_), name="bools")
    with pytest.raises(ValueError, match="unknown reduction op"):
        rj.allreduce(jnp.ones(2), op=17)


def test_process_set(rj):
    members = list(range(1, rj.size()))  # every rank but 0 (a set unlike the world's)
    the_set = rj.add_process_set(members)
    try:
        if rj.rank() in members:
            got = rj.allreduce(jnp.full(2, rj.rank() + 1.0), op=rj.Sum, process_set=the_set)
            assert np.allclose(got, sum(r + 1 for r in members))
            gathered = jax.jit(lambda x: rj.allgather(x, process_set=the_set))(
                jnp.full((1,), rj.rank(), jnp.int32))
            assert gathered.tolist() == members
            if len(members) > 1:  # the error names world ranks
                tree = {"a": jnp.ones(2)} if rj.rank() == 1 else {"b": jnp.ones(2)}
                with pytest.raises(exceptions.MismatchError,
                                   match=r"leaf 'a' is float(32|64)\[2\] on rank 1; missing on "
                                         r"rank 2"):
                    rj.grouped_allreduce(tree, process_set=the_set)
    finally:
        rj.remove_process_set(the_set)


def mlp_init(key, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append({"w": jax.random.normal(sub, (fan_in, fan_out)) / np.sqrt(fan_in),
                       "b": jnp.zeros(fan_out)})
    return params


def mlp_loss(params, x, y):
    h = x
    for layer in params[:-1]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    logits = h @ params[-1]["w"] + params[-1]["b"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, 4), axis=-1))


def batch_of(rank, step):
    rng = np.random.default_rng(1000 * rank + step)
    x = rng.standard_normal((16, 8))
    return jnp.asarray(x), jnp.asarray((x[:, 0] > 0).astype(np.int32) + 2 * (x[:, 1] > 0))


def test_optax_training_loop_ranks_agree(rj):
    import optax
    n, r = rj.size(), rj.rank()
    # each rank starts elsewhere: broadcast_parameters makes them agree
    params = rj.broadcast_parameters(mlp_init(jax.random.PRNGKey(r), [8, 16, 4]), root_rank=0)
    first = [np.asarray(p) for p in jax.tree_util.tree_leaves(params)]

    # One step of SGD outside jit against the mean of every rank's gradient computed here.
    sgd = rj.DistributedOptimizer(optax.sgd(0.1))
    state = sgd.init(params)
    grads = jax.grad(mlp_loss)(params, *batch_of(r, 0))
    updates, state = sgd.update(grads, state, params)
    stepped = optax.apply_updates(params, updates)
    mean_grad = jax.tree_util.tree_map(
        lambda *g: sum(np.asarray(x, np.float64) for x in g) / n,
        *[jax.grad(mlp_loss)(params, *batch_of(q, 0)) for q in range(n)])
    for got, p, g in zip(jax.tree_util.tree_leaves(stepped), first,
                         jax.tree_util.tree_leaves(mean_grad)):
        assert np.allclose(np.asarray(got), p - 0.1 * g, rtol=1e-5, atol=1e-7)

    # Then a jit-compiled loop with Adam behind allreduce_gradients in a chain.
    tx = optax.chain(rj.allreduce_gradients(), optax.clip_by_global_norm(10.0),
                     optax.adam(1e-2))
    state = tx.init(stepped)

    @jax.jit
    def train_step(params, state, x, y):
        loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    params, losses = stepped, []
    for step in range(1, 41):
        params, state, loss = train_step(params, state, *batch_of(r, step % 4))
        losses.append(float(loss))
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    # every rank holds the same parameters, bit for bit
    for leaf in jax.tree_util.tree_leaves(params):
        gathered = np.asarray(rj.allgather(leaf[None]))
        assert all(np.array_equal(gathered[0], gathered[q]) for q in range(n))


def test_gradient_predivide_factor(rj):
    import optax
    n = rj.size()
    tx = rj.allreduce_gradients(gradient_predivide_factor=2.0)
    grads = {"g": jnp.full(3, rj.rank() + 1.0)}
    updates, _ = tx.update(grads, tx.init(grads))
    assert np.allclose(updates["g"], (n + 1) / 2)
    summed, _ = rj.allreduce_gradients(op=rj.Sum, name="summed").update(grads, optax.EmptyState())
    assert np.allclose(summed["g"], n * (n + 1) / 2)
    with pytest.raises(ValueError, match="gradient_predivide_factor"):
        rj.allreduce_gradients(op=rj.Sum, gradient_predivide_factor=2.0)


def test_io_callback_where_jax_has_no_buffer_callback(rj, monkeypatch):
    """JAX before 0.7 has no buffer_callback: the ordered io_callback serves."""
    from ringlet.jax import compiled_callback
    monkeypatch.setattr(compiled_callback, "_buffer_callback", None)
    n, r = rj.size(), rj.rank()

    @jax.jit
    def collectives(x):
        return (rj.allreduce(x, op=rj.Sum, name="io.sum"),
                rj.grouped_allreduce({"a": x, "b": x.astype(jnp.bfloat16)}, op=rj.Max,
                                     name="io.tree"),
                rj.allgather(x, name="io.gather"), rj.broadcast(x, 0, name="io.bcast"))

    x = input_of(r, (2, 2), jnp.float32)
    total, tree, gathered, root = collectives(x)
    everyone = np.stack([values_of(q, (2, 2)) for q in range(n)])
    assert np.allclose(total, everyone.sum(0)) and np.allclose(tree["a"], everyone.max(0))
    assert tree["b"].dtype == jnp.bfloat16 and np.allclose(tree["b"], everyone.max(0))
    assert np.allclose(gathered, everyone.reshape(2 * n, 2)) and np.allclose(root, everyone[0])


def test_results_are_adopted_without_a_copy(rj):
    """An allreduce's or broadcast's result is the buffer the collective wrote, adopted
    by JAX, and serves the next result of its size once JAX lets go of it. It is
    uncommitted, as JAX's own arrays are: a jit-compiled function runs on it without
    compiling again."""
    from ringlet.jax import arrays

    def in_pool(array):
        address = array.unsafe_buffer_pointer()
        return any(raw.ctypes.data <= address < raw.ctypes.data + raw.size
                   for kept in arrays._pool.values() for raw in kept)

    x = jnp.full((256, 256), rj.rank() + 1.0, jnp.float32)
    first = rj.allreduce(x, op=rj.Sum, name="adopted")
    assert in_pool(first) and np.allclose(first, sum(range(1, rj.size() + 1)))
    address = first.unsafe_buffer_pointer()
    del first
    again = rj.allreduce(x * 2, op=rj.Sum, name="adopted")
    assert again.unsafe_buffer_pointer() == address
    assert np.allclose(again, 2 * sum(range(1, rj.size() + 1)))
    assert not again.committed
    double = jax.jit(lambda a: a * 2)
    double(x)
    compiled = double._cache_size()
    double(again)
    double(rj.broadcast(x, 0, name="adopted.broadcast"))
    assert double._cache_size() == compiled, "a result made the function compile again"
    assert in_pool(rj.broadcast(x.astype(jnp.bfloat16), 0, name="adopted.bf16"))
