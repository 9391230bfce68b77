"""Keras 3 on TensorFlow: the seam's functions (ringlet.keras.keras3.backends)
over ringlet.tensorflow's ops, eager and inside the ``tf.function`` that
``model.fit`` traces.

A Keras 3 variable is not a tf.Variable: it holds one (``.value``), which is
what TensorFlow's ops read and assign.

Inside an XLA-compiled function (``model.compile(jit_compile=True)``) on
the host, allreduce and broadcast run through their XLA kernels
(``tensorflow_ops/xla_ops.cc``), and so do DistributedOptimizer's reduction
of dense gradients and broadcast_variables. The collectives whose output shape XLA cannot
know before the ranks meet (allgather, reducescatter, and so sparse gradients
unless ``sparse_as_dense=True``) are refused while the function is traced,
naming the fix, rather than failing in XLA's compiler.
"""

import tensorflow as tf
from tensorflow.python.ops import control_flow_util

from ringlet.tensorflow import functions as _functions
from ringlet.tensorflow import mpi_ops as _ops
from ringlet.tensorflow.compression import Compression  # noqa: F401  (hvd.Compression)
from ringlet.tensorflow.functions import allgather_object, broadcast_object  # noqa: F401
from ringlet.tensorflow.mpi_ops import barrier, join  # noqa: F401
from ringlet.tensorflow.gradient_tape import GradientReduction, reduce_shared
from ringlet.tensorflow.util import ref_of


def _in_xla():
    graph = tf.compat.v1.get_default_graph()
    return not tf.executing_eagerly() and control_flow_util.GraphOrParentsInXlaContext(graph)


def _check_xla_kernels(what):
    """In an XLA-compiled function, refuses by name where Ringlet's XLA kernels
    cannot serve it: this install's op library has none (built without
    tf2xla's headers, or RINGLET_TENSORFLOW_OPS=0), or XLA compiles for a GPU
    (the kernels serve the host; TensorFlow places a compiled function on a
    GPU where it sees one)."""
    if not _in_xla():
        return
    from ringlet.tensorflow import ops
    why = None
    if not ops.has_xla_kernels():
        why = "this install's TensorFlow ops have no XLA kernels"
    elif tf.config.list_logical_devices("GPU"):
        why = ("Ringlet's XLA kernels run on the host, and TensorFlow compiles for the "
               "GPU it sees")
    if why is not None:
        raise RuntimeError(
            f"ringlet.keras: {what} inside an XLA-compiled function (jit_compile=True): "
            f"{why}. Compile the model with model.compile(..., jit_compile=False)")


def _check_not_xla(what, fix=""):
    if _in_xla():
        raise RuntimeError(
            f"ringlet.keras: {what} inside an XLA-compiled function (jit_compile=True): "
            f"its output's shape is known only once the ranks meet, and XLA fixes every "
            f"shape when it compiles; only allreduce and broadcast have XLA kernels. "
            f"{fix or 'Compile the model with model.compile(..., jit_compile=False), or call it outside the compiled function'}")


def _tf_variable(variable):
    return variable.value if not isinstance(variable, tf.Variable) and hasattr(
        variable, "value") else variable


class GradientReducer:
    """DistributedOptimizer's reduction (ringlet.tensorflow's GradientReduction: one
    grouped allreduce per call, IndexedSlices by allgather unless sparse_as_dense)."""

    def __init__(self, settings, name):
        predivide = settings.gradient_predivide_factor if settings.op == _ops.Average else 1.0
        self._reduction = GradientReduction(settings.compression or Compression.none,
                                            settings.sparse_as_dense, settings.op, predivide,
                                            settings.process_set,
                                            device_dense=settings.device_dense,
                                            device_sparse=settings.device_sparse)
        self._scale_local = settings.scale_local_gradients
        self._sparse_as_dense = settings.sparse_as_dense
        self._local = set()
        self._name = name

    def register_local_var(self, variable):
        self._local.add(ref_of(variable))

    def __call__(self, grads, variables):
        _check_xla_kernels("DistributedOptimizer reduces the gradients")
        if not self._sparse_as_dense and any(isinstance(g, tf.IndexedSlices) for g in grads):
            _check_not_xla("DistributedOptimizer gathers sparse gradients (IndexedSlices)",
                           "Pass DistributedOptimizer(..., sparse_as_dense=True), which "
                           "reduces them as dense tensors, or compile with jit_compile=False")
        return reduce_shared(self._reduction, list(grads), list(variables), self._local,
                             self._scale_local, self._name)


def _tensor(value):
    if isinstance(value, (tf.Tensor, tf.IndexedSlices)):
        return value
    return tf.convert_to_tensor(_tf_variable(value))


def allreduce(value, name, op, prescale_factor, postscale_factor, compression, process_set):
    _check_xla_kernels("allreduce")
    return _ops.allreduce(_tensor(value), name=name, op=op, prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor, compression=compression,
                          process_set=process_set)


def allgather(value, name, process_set):
    _check_not_xla("allgather")
    return _ops.allgather(_tensor(value), name=name, process_set=process_set)


def broadcast(value, root_rank, name, process_set):
    _check_xla_kernels("broadcast")
    return _ops.broadcast(_tensor(value), root_rank, name=name, process_set=process_set)


def reducescatter(value, name, op, process_set):
    _check_not_xla("reducescatter")
    return _ops.reducescatter(_tensor(value), name=name, op=op, process_set=process_set)


def broadcast_variables(variables, root_rank, process_set):
    """``root_rank``'s values assigned to ``variables`` (Keras or TensorFlow ones) in one
    grouped collective."""
    _check_xla_kernels("broadcast_variables")
    return _functions.broadcast_variables([_tf_variable(v) for v in variables], root_rank,
                                          process_set)


def is_sparse(grad):
    return isinstance(grad, tf.IndexedSlices)


def densify(grad):
    return tf.convert_to_tensor(grad)


def cond(pred, true_fn, false_fn, state=()):
    """tf.cond: both branches traced, the one ``pred`` names run (at once when eager);
    TensorFlow's variables are assigned in place, so ``state`` is not needed."""
    del state
    return tf.cond(pred, true_fn, false_fn)
