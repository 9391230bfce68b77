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
