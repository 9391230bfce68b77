"""DistributedGradientTape and PartialDistributedGradientTape: tapes whose
gradient() returns the gradients reduced over the ranks; and GradientReduction,
how they, the TensorFlow 1 DistributedOptimizer and the Keras one reduce
gradients."""

import warnings

import tensorflow as tf

from ringlet import _ringlet
from ringlet.common import basics as _basics
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.tensorflow.compression import Compression
from ringlet.tensorflow.mpi_ops import Average, _elastic_job, _size_of, grouped_allreduce
from ringlet.tensorflow.util import ref_of


def check_groups(num_groups, groups):
    """Horovod's ``groups`` (with the deprecated ``num_groups`` folded in), checked."""
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be "
                      "removed", DeprecationWarning, stacklevel=3)
        if groups is None:
            groups = num_groups
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError("groups should be a non-negative integer or a list of list of "
                         "tf.Variable.")
    return groups


def _even_chunks(items, n):
    """``items`` cut into ``n`` consecutive chunks whose sizes differ by one at most."""
    size, extra = divmod(len(items), n)
    return [items[i * size + min(i, extra):(i + 1) * size + min(i + 1, extra)]
            for i in range(n)]


class GradientReduction:
    """How gradients are reduced over a process set: Horovod's arguments, checked
    once.

    ``groups``: None reduces every gradient in one grouped collective (one op per
    dtype); an int n cuts them into n groups; a list of lists of variables makes a
    group of each list's gradients and one of each other gradient.
    ``device_dense``/``device_sparse``: where the collectives' ops go (Horovod's
    arguments; empty: TensorFlow's placement).
    """

    def __init__(self, compression, sparse_as_dense, op, gradient_predivide_factor,
                 process_set, groups=None, device_dense="", device_sparse=""):
        if op == _basics.Adasum:
            raise NotImplementedError("op=Adasum is not implemented by Ringlet yet")
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor not supported with op != Average")
        self.compression = compression
        self.sparse_as_dense = sparse_as_dense
        self.op = op
        self.process_set = process_set
        self.groups = groups
        self.device_dense, self.device_sparse = device_dense, device_sparse
        self.prescale, self.postscale = 1.0, 1.0
        if op == Average:
            # The average's 1/size comes after the sum; the factor splits it.
            self.prescale = 1.0 / gradient_predivide_factor
            self.postscale = gradient_predivide_factor

    def members(self):
        """The set's size, now."""
        return _ringlet.process_set_size(_set_id(self.process_set))

    def size(self, dtype):
        """The set's size as a ``dtype`` scalar, read when the graph runs in an
        elastic job (``mpi_ops._size_of``)."""
        return _size_of(self.process_set, dtype)

    def _chunks(self, grads, variables):
        present = [i for i, g in enumerate(grads) if g is not None]
        if self.groups is None:
            return [present] if present else []
        if not isinstance(self.groups, list):
            return [c for c in _even_chunks(present, self.groups) if c]
        # Variables by identity: two may share a name.
        where = {ref_of(variables[i]): i for i in present}
        chunks = []
        for group in self.groups:
            chunk = [where.pop(ref_of(v)) for v in group if ref_of(v) in where]
            if chunk:
                chunks.append(chunk)
        return chunks + [[i] for i in where.values()]

    def __call__(self, grads, name, variables=None, use_generic_names=False):
        """The gradients reduced over the set (None stays None), in the same order.

        Each group goes as one collective, named after ``name`` when eager (one call
        runs at a time) and after its gradients in a graph (where two calls may run
        at once); ``use_generic_names`` names them ``grad_<k>``, outside any name
        scope.
        Ranks outside the set, and a set of one, keep their gradients as they are;
        but a graph of an elastic job reduces them at any size, since the set may
        have grown by the time it runs.
        """
        grads = list(grads)
        if self.sparse_as_dense:
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                     for g in grads]
        set_id = _set_id(self.process_set)
        alone = self.members() <= 1 and (tf.executing_eagerly() or not _elastic_job())
        if _ringlet.process_set_rank(set_id) < 0 or alone:
            return grads
        out = list(grads)
        for k, chunk in enumerate(self._chunks(grads, variables)):
            if use_generic_names:
                group_name = f"grad_{k}"
            else:
                group_name = f"{name}.{k}" if tf.executing_eagerly() else None
            reduced = grouped_allreduce([grads[i] for i in chunk], compression=self.compression,
                                        op=self.op, prescale_factor=self.prescale,
                                        postscale_factor=self.postscale,
                                        process_set=self.process_set, name=group_name,
                                        ignore_name_scope=use_generic_names,
                                        device_dense=self.device_dense,
                                        device_sparse=self.device_sparse)
            for i, r in zip(chunk, reduced):
                out[i] = r
        return out


def scaled_down(grad, reduction):
    """A local gradient divided by the size of ``reduction``'s set, as Horovod scales
    the gradients it does not reduce (so that they weigh as the averaged ones do)."""
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / reduction.size(grad.values.dtype), grad.indices,
                                grad.dense_shape)
    return grad / reduction.size(grad.dtype)


def reduce_shared(reduction, grads, sources, local_refs, scale_local, name,
                  use_generic_names=False):
    """``grads`` (of ``sources``) reduced, but for those of the sources whose ``ref()``
    is in ``local_refs``: these stay local, divided by the set's size when
    ``scale_local``."""
    shared = [i for i, s in enumerate(sources) if ref_of(s) not in local_refs]
    reduced = reduction([grads[i] for i in shared], name, [sources[i] for i in shared],
                        use_generic_names)
    out = list(grads)
    for i, r in zip(shared, reduced):
        out[i] = r
    if scale_local and local_refs:
        for i, s in enumerate(sources):
            if ref_of(s) in local_refs and out[i] is not None:
                out[i] = scaled_down(out[i], reduction)
    return out


class _DistributedGradientTape:
    """Mixed in before the wrapped tape's class; see DistributedGradientTape()."""

    def register_local_source(self, source):
        """Marks ``source`` as this rank's own: its gradient is not reduced (and is
        divided by the set's size when scale_local_gradients)."""
        self._local_sources.add(ref_of(source))

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False,
                 **kwargs):
        grads = super().gradient(target, sources, output_gradients, **kwargs)
        out = reduce_shared(self._reduction, tf.nest.flatten(grads), tf.nest.flatten(sources),
                            self._local_sources, self._scale_local_gradients,
                            "DistributedGradientTape", use_generic_names)
        return tf.nest.pack_sequence_as(grads, out)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None,
                                       use_generic_names=False):
        """(the [(source, gradient)] of the local sources, those of the others)."""
        grads = self.gradient(target, sources, output_gradients, use_generic_names)
        local, shared = [], []
        for s, g in zip(sources, grads):
            (local if ref_of(s) in self._local_sources else shared).append((s, g))
        return local, shared


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """Wraps a ``tf.GradientTape`` so that ``gradient()`` averages (or sums) the gradients
    over the ranks of the set. Horovod's arguments; the collectives' ops go on
    ``device_dense`` (``device_sparse`` for IndexedSlices) where one is named."""
    groups = check_groups(num_groups, groups)
    reduction = GradientReduction(compression, sparse_as_dense, op, gradient_predivide_factor,
                                  process_set, groups, device_dense, device_sparse)
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._reduction = reduction
    tape._local_sources = set()
    tape._scale_local_gradients = scale_local_gradients
    tape.process_set = process_set
    return tape


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="",
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """DistributedGradientTape whose ``local_layers`` (a Keras layer or a list of them)
    keep their gradients local."""
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, tf.keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, tf.keras.layers.Layer) for layer in local_layers):
        raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    for layer in local_layers:
        for variable in layer.trainable_weights:
            tape.register_local_source(variable)
    return tape
