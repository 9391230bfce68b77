"""Inside a ``tf.function``, the op library's failures reach the caller as
the TensorFlow error Horovod's ops raise for the same cause
(horovod/tensorflow/mpi_ops.cc ConvertStatus over its controller's
statuses): ranks that disagree about a collective give
``tf.errors.FailedPreconditionError``, a wrong call
``tf.errors.InvalidArgumentError``, as ringlet.tensorflow.errors'
``tf_error_class`` says for the code each error carries as its payload; and
the job goes on.

Run by two ranks with the op library (tests/python/CMakeLists.txt)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from ringlet.common import exceptions
from ringlet.tensorflow import errors as tf_errors


@pytest.fixture
def rtf():
    import ringlet.tensorflow as hvd
    from ringlet.tensorflow import ops
    if os.environ.get("RINGLET_TEST_EXPECT_TENSORFLOW_OPS") != "1":
        pytest.skip("runs where the build has the op library "
                    "(RINGLET_TEST_EXPECT_TENSORFLOW_OPS=1)")
    assert ops.library is not None, "the build has the op library, but it did not load"
    hvd.init()
    yield hvd
    hvd.barrier()
    hvd.shutdown()


def code_of(error):
    return int(error.experimental_payloads[tf_errors.ERROR_CODE_PAYLOAD.encode()])


def test_a_shape_mismatch_is_a_failed_precondition_and_the_job_goes_on(rtf):
    @tf.function
    def mismatched():
        return rtf.allreduce(tf.ones([2 + rtf.rank()]), name="graph_shapes", op=rtf.Sum)

    with pytest.raises(tf.errors.FailedPreconditionError) as failed:
        mismatched()
    assert "graph_shapes" in failed.value.message
    assert code_of(failed.value) == exceptions.MismatchError.code
    assert tf_errors.tf_error_class(code_of(failed.value)) is tf.errors.FailedPreconditionError

    @tf.function
    def matched():
        return rtf.allreduce(tf.ones([3]), name="graph_after", op=rtf.Sum)

    assert np.array_equal(matched().numpy(), np.full(3, float(rtf.size())))


def test_a_wrong_call_is_an_invalid_argument(rtf):
    @tf.function
    def bad_root():
        return rtf.broadcast(tf.ones([2]), rtf.size(), name="graph_root")

    with pytest.raises(tf.errors.InvalidArgumentError) as failed:
        bad_root()
    assert code_of(failed.value) == exceptions.InvalidArgumentError.code
    assert tf_errors.tf_error_class(code_of(failed.value)) is tf.errors.InvalidArgumentError
    assert np.array_equal(rtf.allreduce(tf.ones([2]), op=rtf.Sum).numpy(),
                          np.full(2, float(rtf.size())))


@pytest.mark.parametrize("kind", ["allgather", "reducescatter", "allreduce"])
def test_an_op_refused_partway_fails_once_what_it_submitted_completed(rtf, kind):
    # On rank 0 the op's second member repeats the first's name, which is
    # still in flight, so its submission is refused after the first went in.
    # The first still reads the op's inputs (and writes its outputs) until it
    # completes, which needs the other ranks, late on purpose: the op must not
    # end, letting TensorFlow free those buffers, before then. The late ranks
    # submit the first member alone (were they to repeat it too, theirs could
    # complete before their second went in, which would then wait for a
    # partner that never comes).
    from ringlet.tensorflow import ops
    import time
    x = tf.fill([4, 3], float(rtf.rank() + 1))
    name = f"partway_{kind}"
    members = 2 if rtf.rank() == 0 else 1
    if kind == "allgather":
        def run():
            return ops.library.ringlet_allgather([x] * members, process_set_id=0,
                                                 tensor_names=[name] * members)
    else:
        op = getattr(ops.library, f"ringlet_{kind}")
        extra = {"as_group": False} if kind == "allreduce" else {}

        def run():
            return op([x] * members, reduce_op=0, prescale_factor=1.0, postscale_factor=1.0,
                      process_set_id=0, tensor_names=[name] * members, **extra)
    late = 1.0
    rtf.barrier()
    if rtf.rank() == 0:
        started = time.monotonic()
        with pytest.raises(tf.errors.InvalidArgumentError) as failed:
            run()
        took = time.monotonic() - started
        assert "already in flight" in failed.value.message, failed.value.message
        assert took > late / 2, f"the op ended {took:.3f} s in, before the others submitted"
    else:
        time.sleep(late)
        (out,) = run()
        if kind == "allreduce":
            total = rtf.size() * (rtf.size() + 1) / 2
            assert np.array_equal(out.numpy(), np.full([4, 3], total))
        elif kind == "allgather":
            assert out.shape == (4 * rtf.size(), 3)
    # The first member ran on every rank: its name is free, and the job goes on.
    assert np.array_equal(rtf.allreduce(tf.ones([2]), name=name, op=rtf.Sum).numpy(),
                          np.full(2, float(rtf.size())))


@pytest.mark.parametrize("cause", ["invalid argument", "mismatch", "not initialized"])
def test_tf_error_class_is_what_the_op_library_raises(rtf, cause):
    """For every failure the op library can be made to give, the TensorFlow class it
    raises in a graph is tf_error_class of the code it carries, and eagerly the
    exception is that class and Ringlet's class of the code."""
    n, r = rtf.size(), rtf.rank()
    expected_code = {"invalid argument": exceptions.InvalidArgumentError.code,
                     "mismatch": exceptions.MismatchError.code,
                     "not initialized": exceptions.NotInitializedError.code}[cause]

    def collective(suffix):
        if cause == "invalid argument":
            return rtf.broadcast(tf.ones([2]), n, name=f"agree_root{suffix}")
        if cause == "mismatch":
            return rtf.allreduce(tf.ones([2 + r]), name=f"agree_shapes{suffix}", op=rtf.Sum)
        return rtf.allreduce(tf.ones([2]), name=f"agree_stopped{suffix}", op=rtf.Sum)

    in_graph = tf.function(lambda: collective(".graph"))
    if cause == "not initialized":
        rtf.barrier()
        rtf.shutdown()
    try:
        with pytest.raises(tf.errors.OpError) as failed:
            in_graph()
        with pytest.raises(tf.errors.OpError) as failed_eagerly:
            collective(".eager")
    finally:
        if cause == "not initialized":
            rtf.init()
    assert code_of(failed.value) == expected_code
    assert type(failed.value) is tf_errors.tf_error_class(expected_code)
    assert isinstance(failed_eagerly.value, tf_errors.tf_error_class(expected_code))
    assert isinstance(failed_eagerly.value, exceptions.exception_for_code(expected_code))
    assert failed_eagerly.value.code == expected_code
