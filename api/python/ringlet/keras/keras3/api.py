"""ringlet.keras's functions for Keras 3, Horovod's names and arguments, each
over the backend seam (ringlet.keras.keras3.backends): importing this refuses
a backend that is not served."""

import keras

from ringlet.common.basics import Average, Sum
from ringlet.common.process_sets import global_process_set
from ringlet.keras.keras3 import backends as _backends
from ringlet.keras.keras3 import optimizer as _optimizer
from ringlet.keras.settings import Settings, check

backend = _backends.load(keras)
Compression = backend.Compression
barrier, join = backend.barrier, backend.join
broadcast_object, allgather_object = backend.broadcast_object, backend.allgather_object


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A Keras 3 optimizer of ``optimizer``'s class and configuration whose ``apply``
    (and ``apply_gradients``, as ``model.fit`` calls it) applies the gradients averaged
    (``op=Sum``: summed) over the ranks of ``process_set``.

    ``gradient_predivide_factor`` f splits the average: gradients are divided by f
    before the sum and by size/f after it. With ``backward_passes_per_step`` N > 1,
    each pass adds its gradients to local sums and every N-th pass reduces and applies
    them (divided by N with ``average_aggregated_gradients``). ``sparse_as_dense``
    reduces sparse gradients as dense tensors. ``groups`` and ``num_groups`` are
    accepted for Horovod's signature: the gradients go in one grouped collective.
    """
    if num_groups:
        groups = groups or num_groups
    check(op, groups, backward_passes_per_step)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    return _optimizer.wrap(optimizer, Settings(
        name=name, compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op,
        backward_passes_per_step=int(backward_passes_per_step),
        average_aggregated_gradients=average_aggregated_gradients,
        process_set=process_set, scale_local_gradients=scale_local_gradients,
        device_dense=device_dense, device_sparse=device_sparse), backend)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average, groups=None,
                                process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """DistributedOptimizer whose ``local_layers`` (a Keras layer or a list of them,
    built) keep their trainable weights' gradients on this rank (divided by the
    ranks' number with ``scale_local_gradients``)."""
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    if not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
        raise ValueError("PartialDistributedOptimizer: local_layers must be Keras layers "
                         "(keras.layers.Layer)")
    opt = DistributedOptimizer(optimizer, name=name, device_dense=device_dense,
                               device_sparse=device_sparse, compression=compression,
                               sparse_as_dense=sparse_as_dense,
                               gradient_predivide_factor=gradient_predivide_factor, op=op,
                               groups=groups, process_set=process_set,
                               scale_local_gradients=scale_local_gradients)
    for layer in local_layers:
        for var in layer.trainable_weights:
            opt.register_local_var(var)
    return opt


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """Assigns ``root_rank``'s values to ``variables`` (Keras variables) on every rank."""
    return backend.broadcast_variables(list(variables), root_rank, process_set)


def broadcast_global_variables(root_rank):
    """Horovod's graph-mode call; Keras 3 has no global variables (RuntimeError, as
    Horovod raises when eager): broadcast the model's and the optimizer's variables."""
    raise RuntimeError("broadcast_global_variables: Keras 3 has no global variables; use "
                       "broadcast_variables(model.variables + optimizer.variables, root_rank) "
                       "or BroadcastGlobalVariablesCallback")


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none, process_set=global_process_set):
    """The reduction (Average by default; ``average=False``: Sum) of a tensor-compatible
    value over the ranks, as a backend tensor."""
    if op is None:
        op = Average if average in (None, True) else Sum
    elif average is not None:
        raise ValueError("allreduce: pass op or average, not both")
    return backend.allreduce(value, name, op, prescale_factor, postscale_factor, compression,
                             process_set)


def allgather(value, name=None, process_set=global_process_set):
    """Every rank's value concatenated on dimension 0, as a backend tensor."""
    return backend.allgather(value, name, process_set)


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s value on every rank, as a backend tensor."""
    return backend.broadcast(value, root_rank, name, process_set)


def reducescatter(value, name=None, op=Average, process_set=global_process_set):
    """This rank's share of dimension 0 of the reduction of the value."""
    return backend.reducescatter(value, name, op, process_set)


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False):
    """Loads a Keras 3 model (any format Keras loads) whose optimizer comes back as a
    DistributedOptimizer with ``compression``, its saved state (slots, iterations)
    kept. Keras's optimizers load without naming them; ``custom_optimizers`` names
    classes of one's own (``custom_objects`` goes to Keras as well); ``legacy_opts``
    is accepted for Horovod's signature."""
    objects = {cls.__name__: cls for cls in custom_optimizers or []}
    objects.update(custom_objects or {})
    model = keras.models.load_model(filepath, custom_objects=objects)
    if isinstance(model.optimizer, keras.optimizers.Optimizer):
        _optimizer.distribute_in_place(model.optimizer, Settings(compression=compression),
                                       backend)
    return model
