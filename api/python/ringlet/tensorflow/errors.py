"""Ringlet's failures as the TensorFlow errors horovod.tensorflow raises.

Horovod's TensorFlow ops fail with the status its runtime gives them:
``FailedPreconditionError`` when the ranks disagree about a collective (its
controller's error response) and before ``init()``, ``InvalidArgumentError`` for
a wrong call on this rank, and ``UnknownError`` for everything else (a
shutdown, and any failure while the collective runs: a lost peer, a timeout).
``tf_error_class`` is that table; both paths of ringlet.tensorflow follow it.

When eager, a collective raises one exception that is both: the TensorFlow
error above, for Horovod's scripts, and Ringlet's own class
(``ringlet.common.exceptions``, with its ``code``), as the other frameworks
raise it. Inside a graph, the op's error reaches the caller as TensorFlow's
class alone.
"""

import tensorflow as tf

from ringlet.common import exceptions


def tf_error_class(code):
    """The ``tf.errors`` class Horovod raises for a failure of Ringlet's ``ErrorCode``
    value ``code``."""
    if code == exceptions.InvalidArgumentError.code:
        return tf.errors.InvalidArgumentError
    if code in (exceptions.NotInitializedError.code, exceptions.MismatchError.code):
        return tf.errors.FailedPreconditionError
    return tf.errors.UnknownError


# Ringlet's exceptions, as raised by the core's bindings; each has `code`.
RINGLET_ERRORS = (exceptions.HorovodInternalError, exceptions.InvalidArgumentError,
                  exceptions.NotInitializedError, exceptions.ConfigError)

_both_classes = {}


def _both(ringlet_class):
    """A class that is ``ringlet_class`` and the TensorFlow error of its code."""
    cls = _both_classes.get(ringlet_class)
    if cls is None:
        def __init__(self, message):
            super(cls, self).__init__(None, None, message)

        cls = type(ringlet_class.__name__, (tf_error_class(ringlet_class.code), ringlet_class),
                   {"__init__": __init__, "__module__": __name__,
                    "__doc__": ringlet_class.__doc__})
        _both_classes[ringlet_class] = cls
    return cls


def as_tf_error(error):
    """``error`` (one of Ringlet's exceptions) as the exception a collective raises
    when eager: TensorFlow's class and Ringlet's, with the same message and code."""
    code = getattr(error, "code", exceptions.HorovodInternalError.code)
    both = _both(exceptions.exception_for_code(code))(str(error))
    both.code = code
    return both


# Where the op library puts the exact ErrorCode (decimal text): the statuses
# of several codes share one TensorFlow class.
ERROR_CODE_PAYLOAD = "ringlet.error_code"


def from_op_error(error):
    """An op library op's ``tf.errors.OpError`` as the exception the ``py_function``
    path raises for the same failure (see ``as_tf_error``)."""
    payloads = getattr(error, "experimental_payloads", None) or {}
    exact = payloads.get(ERROR_CODE_PAYLOAD, payloads.get(ERROR_CODE_PAYLOAD.encode(), b""))
    if isinstance(exact, bytes):
        exact = exact.decode(errors="replace")
    if exact.strip().isdigit():
        code = int(exact)
    elif isinstance(error, tf.errors.InvalidArgumentError):
        # The ops' own refusals of their arguments carry no code; every status
        # of Ringlet's runtime does (api/python/tensorflow_ops/status.cc).
        code = exceptions.InvalidArgumentError.code
    else:  # TensorFlow's own failure inside the op, or an exception not Ringlet's
        code = exceptions.HorovodInternalError.code
    failure = exceptions.exception_for_code(code)(error.message)
    failure.code = code
    return as_tf_error(failure)
