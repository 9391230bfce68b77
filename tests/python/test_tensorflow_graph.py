"""ringlet.tensorflow in tf.compat.v1 graphs run by sessions, as TensorFlow 1
scripts use it: the collectives, their gradients and the *_op queries run when
the session runs them; DistributedOptimizer around a tf.compat.v1.train
optimizer (with local gradient aggregation), broadcast_global_variables and
BroadcastGlobalVariablesHook in a MonitoredTrainingSession. Expected values are
worked out here with numpy. Runs in the same jobs as test_tensorflow.py (the
op library at two ranks, the py_function path at three)."""

import numpy as np
import pytest

import ringlet.tensorflow  # noqa: F401  (selects the Keras 2 API before tf.keras is used)
import tensorflow as tf


def test_collectives_gradients_and_queries_run_with_the_session(rtf):
    n, r = rtf.size(), rtf.rank()
    w = [float(q + 1) for q in range(n)]
    rows = [q + 1 for q in range(n)]
    start = sum(rows[:r])
    with tf.Graph().as_default():
        mine = tf.ones([rows[r], 2]) * (r + 1)
        even = tf.ones([2 * n, 2]) * (r + 1)
        gathered = rtf.allgather(mine)
        by_row = tf.reshape(tf.range(1, sum(rows) + 1, dtype=tf.float32), [-1, 1]) * w[r]
        by_row *= tf.ones([1, 2])
        bcast = rtf.broadcast(even, 0)
        a2a32, received = rtf.alltoall(even, splits=tf.constant([2] * n, tf.int32))
        a2a64, _ = rtf.alltoall(even, splits=tf.constant([2] * n, tf.int64))
        a2a_even = rtf.alltoall(even)  # no splits: the gathered tensor alone
        scattered = rtf.reducescatter(even, op=rtf.Sum)
        grads = {
            "allgather": tf.gradients(gathered, mine, by_row)[0],
            "broadcast": tf.gradients(bcast, even, tf.ones_like(bcast) * w[r])[0],
            "alltoall": tf.gradients(a2a32, even, tf.ones_like(a2a32) * w[r])[0],
            "reducescatter": tf.gradients(scattered, even, tf.ones_like(scattered) * w[r])[0],
        }
        queries = [rtf.rank_op(), rtf.size_op(), rtf.local_rank_op(), rtf.local_size_op(),
                   rtf.cross_rank_op(), rtf.cross_size_op(), rtf.process_set_included_op()]
        sparse_values = tf.ones([2, 3]) * (r + 1)
        shaped = rtf.allreduce(tf.IndexedSlices(sparse_values, tf.constant([r, r + 1]),
                                                dense_shape=tf.constant([n + 1, 3])))
        shapeless = rtf.allreduce(tf.IndexedSlices(sparse_values, tf.constant([0, 1])),
                                  op=rtf.Sum)
        dense_sum = tf.convert_to_tensor(shaped)
        with tf.compat.v1.Session() as session:
            got = session.run({"gathered": gathered, "bcast": bcast, "a2a32": a2a32,
                               "received": received, "a2a64": a2a64, "a2a_even": a2a_even,
                               "scattered": scattered, "grads": grads, "queries": queries,
                               "dense": dense_sum, "shapeless": shapeless.values})
            last_to_join = session.run(rtf.join())

    everyone = np.concatenate([np.full((rows[q], 2), q + 1.0) for q in range(n)])
    assert np.array_equal(got["gathered"], everyone)
    assert np.array_equal(got["bcast"], np.ones((2 * n, 2)))
    from_each = np.repeat(np.arange(1.0, n + 1), 2)[:, None] * np.ones((1, 2))
    for key in ("a2a32", "a2a64", "a2a_even"):
        assert np.array_equal(got[key], from_each), key
    assert got["received"].tolist() == [2] * n and got["received"].dtype == np.int32
    assert np.array_equal(got["scattered"], np.full((2, 2), n * (n + 1) / 2))

    mean_w = sum(w) / n
    blocks = np.repeat(w, 2)[:, None] * np.ones((1, 2))
    own_rows = np.arange(start + 1, start + rows[r] + 1, dtype=np.float64)[:, None]
    assert np.array_equal(got["grads"]["allgather"], own_rows * mean_w * np.ones((1, 2)))
    assert np.array_equal(got["grads"]["broadcast"],
                          np.full((2 * n, 2), mean_w if r == 0 else 0.0))
    assert np.array_equal(got["grads"]["alltoall"], blocks)
    assert np.array_equal(got["grads"]["reducescatter"], n * blocks)

    assert got["queries"] == [r, n, rtf.local_rank(), rtf.local_size(), rtf.cross_rank(),
                              rtf.cross_size(), 1]
    # Rows q and q + 1 of every rank q, averaged: the scatter of the gathered slices.
    dense = np.zeros((n + 1, 3))
    for q in range(n):
        dense[q:q + 2] += (q + 1.0) / n
    assert np.allclose(got["dense"], dense)
    assert np.array_equal(got["shapeless"], np.concatenate(
        [np.full((2, 3), q + 1.0) for q in range(n)]))
    assert 0 <= last_to_join < n
    assert rtf.allgather_object(int(last_to_join)) == [int(last_to_join)] * n


def test_errors_surface_when_the_session_runs(rtf):
    n, r = rtf.size(), rtf.rank()
    with tf.Graph().as_default():
        mismatched = rtf.allreduce(tf.ones([2 + r]), name="graph_mismatch")
        too_few_rows = rtf.alltoall(tf.ones([n - 1]), splits=[1] * n)
        # Horovod's FailedPrecondition from the op library; a py_function op carries
        # a Python exception that is not a ValueError as UnknownError.
        from ringlet.tensorflow import ops
        in_graph = (tf.errors.FailedPreconditionError if ops.library is not None
                    else tf.errors.UnknownError)
        with tf.compat.v1.Session() as session:
            with pytest.raises(in_graph, match="graph_mismatch"):
                session.run(mismatched)
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=f"add up to {n}, more than the first dimension {n - 1}"):
                session.run(too_few_rows)
    with pytest.raises(RuntimeError, match="does not support eager execution"):
        rtf.broadcast_global_variables(0)


def local_data(rank):
    """Rank ``rank``'s batch of a linear problem, and its starting weights."""
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    return x, y, rng.standard_normal((3, 1)).astype(np.float32)


def test_distributed_optimizer_trains_in_a_monitored_session(rtf):
    """TensorFlow 1 training as Horovod's documents show it: every rank starts from
    rank 0's weights (the hook) and takes the same steps (gradients averaged)."""
    n, r = rtf.size(), rtf.rank()
    lr, steps = 0.05, 6
    x, y, w0 = local_data(r)
    with tf.Graph().as_default():
        weights = tf.compat.v1.get_variable("w", initializer=tf.constant(w0))
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.constant(x), weights) - y))
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = rtf.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(lr))
        assert isinstance(opt, tf.compat.v1.train.Optimizer)
        train = opt.minimize(loss, global_step=global_step)
        hooks = [rtf.BroadcastGlobalVariablesHook(0)]
        losses = []
        with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as session:
            for _ in range(steps):
                losses.append(session.run([train, loss])[1])
            final, step = session.run([weights, global_step])

    # The same steps in float64: w -= lr * (mean over ranks of 2/B X^T (X w - y)).
    data = [local_data(q) for q in range(n)]
    w = data[0][2].astype(np.float64)
    for _ in range(steps):
        grads = [2.0 / len(xq) * xq.T @ (xq @ w - yq) for xq, yq, _ in data]
        w = w - lr * sum(grads) / n
    assert np.allclose(final, w, rtol=1e-4, atol=1e-5)
    assert step == steps
    assert losses[-1] < losses[0]
    gathered = rtf.allgather_object(final.tolist())
    assert gathered == [gathered[0]] * n


def test_backward_passes_per_step_aggregates_locally(rtf):
    """With backward_passes_per_step 4, gradients are summed for four steps, then
    averaged over the passes (average_aggregated_gradients) and the ranks, applied,
    and the global step moves every step."""
    n, r = rtf.size(), rtf.rank()
    passes = 4
    with tf.Graph().as_default():
        var = tf.compat.v1.get_variable("v", initializer=tf.constant([0.0]))
        global_step = tf.compat.v1.train.get_or_create_global_step()

        class ConstantGradient(tf.compat.v1.train.GradientDescentOptimizer):
            def compute_gradients(self, *args, **kwargs):
                return [(tf.constant([float(r)]), var)]

        opt = rtf.DistributedOptimizer(ConstantGradient(1.0), backward_passes_per_step=passes,
                                       average_aggregated_gradients=True)
        update = opt.apply_gradients(opt.compute_gradients(), global_step=global_step)
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.global_variables_initializer(),
                         tf.compat.v1.local_variables_initializer()])
            values = []
            for _ in range(10):
                session.run(update)
                values.append(session.run(var)[0])
            step = session.run(global_step)
    # Every fourth step applies -lr * (sum over 4 passes of r / 4, averaged over ranks).
    per_update = sum(range(n)) / n
    assert values == [-per_update * ((i + 1) // passes) for i in range(10)]
    assert step == 10
    with pytest.raises(ValueError, match="eager execution"):
        rtf.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                 backward_passes_per_step=2)


def test_broadcast_ops_for_graphs(rtf):
    """broadcast_global_variables, broadcast_ and broadcast_object_fn in a session."""
    n, r = rtf.size(), rtf.rank()
    with tf.Graph().as_default():
        first = tf.compat.v1.get_variable("first", initializer=tf.constant([float(r)] * 2))
        second = tf.compat.v1.get_variable("second", initializer=tf.constant(r, tf.int64))
        everything = rtf.broadcast_global_variables(n - 1)
        inplace = rtf.broadcast_([first], 0)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(everything)
            after_all = session.run([first, second])
            session.run(first.assign([float(r) + 10.0] * 2))
            returned = session.run(inplace)
            after_inplace = session.run(first)
            send = rtf.broadcast_object_fn(root_rank=n - 1, session=session)
            obj = send({"from": r})
            with session.as_default():  # the default session when made, as Horovod's
                send_later = rtf.broadcast_object_fn(root_rank=0, name="later")
            function = send_later(lambda x: x + r)  # cloudpickle takes a lambda
    assert after_all[0].tolist() == [float(n - 1)] * 2 and after_all[1] == n - 1
    assert returned[0].tolist() == [10.0] * 2 and after_inplace.tolist() == [10.0] * 2
    assert obj == {"from": n - 1}
    assert function(5) == 5


def test_unnamed_collectives_in_one_graph_are_distinct(rtf):
    """In a tf.compat.v1 graph, collectives of one tensor, and collectives in two
    branches, are distinct collectives."""
    n, r = rtf.size(), rtf.rank()
    s = n * (n + 1) / 2
    with tf.Graph().as_default():
        x = tf.fill([2], float(r + 1))
        flag = tf.constant(True)
        fetches = [rtf.allreduce(x, op=rtf.Sum), rtf.allreduce(x, op=rtf.Max),
                   tf.cond(flag, lambda: rtf.allreduce(tf.ones([2]) * float(r + 1), op=rtf.Sum),
                           lambda: tf.zeros([2])),
                   tf.cond(flag, lambda: rtf.allreduce(tf.ones([3]) * float(10 * (r + 1)),
                                                       op=rtf.Sum),
                           lambda: tf.zeros([3]))]
        with tf.compat.v1.Session() as session:
            got = session.run(fetches)
    assert [g.tolist() for g in got] == [[s] * 2, [float(n)] * 2, [s] * 2, [10 * s] * 3]


def test_a_run_that_never_collects_leaves_nothing_behind(rtf, monkeypatch):
    """On the py_function path a graph's collective is submitted by one op,
    waited for by another and its outputs taken by a third. What a run
    cancelled between them (here: a run of the submitting op alone) submitted
    is released when that op runs again."""
    import time
    from ringlet import _ringlet
    from ringlet.common import exceptions
    from ringlet.tensorflow import pyfunc
    n = rtf.size()
    issued = []

    def recording(*args, real=_ringlet.allreduce_async):
        issued.append(real(*args))
        return issued[-1]
    monkeypatch.setattr(_ringlet, "allreduce_async", recording)
    with tf.Graph().as_default() as graph:
        (total,) = pyfunc.allreduce([tf.ones([2])], ["uncollected"], _ringlet.OP_SUM, 1.0, 1.0,
                                    0)
        # The submitting op comes first; the one that takes the outputs after it.
        submit, _take = [op for op in graph.get_operations() if op.type == "EagerPyFunc"]
        with tf.compat.v1.Session() as session:
            session.run(submit)  # nothing collects it
            (first,) = issued
            deadline = time.monotonic() + 30
            while not _ringlet.poll(first):
                assert time.monotonic() < deadline, "the collective did not complete"
                time.sleep(0.01)
            got = session.run(total)  # submits again, after releasing the first
    assert got.tolist() == [float(n)] * 2
    assert len(issued) == 2 and not pyfunc._started
    for handle in issued:
        with pytest.raises(exceptions.InvalidArgumentError, match="unknown handle"):
            _ringlet.poll(handle)


def test_local_gradient_aggregation_helper_as_horovods(rtf):
    """LocalGradientAggregationHelper used on its own, as Horovod's: a registered
    local variable's sums are not given to allreduce_func and are divided by the
    process set's size; every graph gets its own sums and counter; with the Keras
    optimizer type they are initialized in Keras's session."""
    from ringlet.tensorflow.gradient_aggregation import LocalGradientAggregationHelper as Helper
    n, r = rtf.size(), rtf.rank()
    # Ranks 0 and 1: with three ranks, its size, not the job's, divides local sums.
    pair = rtf.global_process_set if n == 2 else rtf.add_process_set([0, 1])
    given = []

    def allreduce_func(grads, variables):
        given.append(len(variables))
        return [rtf.allreduce(g, op=rtf.Sum, process_set=pair) for g in grads]

    def helper(optimizer_type):
        return Helper(2, allreduce_func, False, True, r, optimizer_type, process_set=pair,
                      scale_local_gradients=True)

    legacy = helper(Helper._OPTIMIZER_TYPE_LEGACY)
    try:
        # The legacy helper in two graphs, then a Keras one whose sums nobody initializes.
        for aggregation in ([legacy, legacy, helper(Helper._OPTIMIZER_TYPE_KERAS)]
                            if r in (0, 1) else []):
            keras = aggregation.optimizer_type == Helper._OPTIMIZER_TYPE_KERAS
            with tf.Graph().as_default():
                shared = tf.compat.v1.Variable([0.0])
                local = tf.compat.v1.Variable([0.0, 0.0])
                aggregation.register_local_var(local)
                out = aggregation.compute_gradients(
                    [tf.constant([float(r + 1)]), tf.constant([10.0 * (r + 1)] * 2)],
                    [shared, local])
                if keras:
                    session = tf.compat.v1.keras.backend.get_session()
                else:
                    session = tf.compat.v1.Session()
                    session.run(tf.compat.v1.local_variables_initializer())
                first, second = session.run(out), session.run(out)
                if not keras:
                    session.close()
            if keras:
                tf.keras.backend.clear_session()
            # First pass: the gradients as given. Second: the sums of two passes, the
            # shared one summed over the pair (2 * 1 + 2 * 2), the local one divided
            # by the pair's size, both divided by the two passes.
            assert [g.tolist() for g in first] == [[r + 1.0], [10.0 * (r + 1)] * 2]
            assert [g.tolist() for g in second] == [[3.0], [5.0 * (r + 1)] * 2]
        assert given == ([1, 1, 1] if r in (0, 1) else [])
    finally:
        if pair is not rtf.global_process_set:
            rtf.remove_process_set(pair)
