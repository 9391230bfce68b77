"""DistributedGradientTape: a GradientTape whose gradient() returns the
gradients reduced over the ranks, all dense ones in one grouped collective."""

import tensorflow as tf

from ringlet.common import basics as _basics
from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.compression import Compression
from ringlet.tensorflow.mpi_ops import Average, allreduce, grouped_allreduce


class GradientReduction:
    """How DistributedGradientTape and the Keras DistributedOptimizer reduce gradients:
    Horovod's arguments, checked once."""

    def __init__(self, compression, sparse_as_dense, op, gradient_predivide_factor,
                 process_set):
        if op == _basics.Adasum:
            raise NotImplementedError("op=Adasum is not implemented by Ringlet yet")
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor is only meaningful with op=Average")
        self.compression = compression
        self.sparse_as_dense = sparse_as_dense
        self.op = op
        self.process_set = process_set
        self.prescale, self.postscale = 1.0, 1.0
        if op == Average:
            self.prescale = 1.0 / gradient_predivide_factor
            self.postscale = gradient_predivide_factor

    def __call__(self, grads, name):
        """The list of gradients reduced over the ranks (None stays None); every dense one
        goes in one grouped collective named after ``name``."""
        out = list(grads)
        dense = []
        for i, g in enumerate(grads):
            if g is None:
                continue
            if isinstance(g, tf.IndexedSlices) and not self.sparse_as_dense:
                out[i] = allreduce(g, op=self.op, name=f"{name}.{i}",
                                   process_set=self.process_set)
                continue
            out[i] = tf.convert_to_tensor(g)
            dense.append(i)
        if dense:
            reduced = grouped_allreduce([out[i] for i in dense], compression=self.compression,
                                        op=self.op, prescale_factor=self.prescale,
                                        postscale_factor=self.postscale,
                                        process_set=self.process_set, name=name)
            for i, r in zip(dense, reduced):
                out[i] = r
        return out


class _DistributedGradientTape:
    """Mixed in before the wrapped tape's class; see DistributedGradientTape()."""

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        grads = super().gradient(target, sources, output_gradients, **kwargs)
        flat = tf.nest.flatten(grads, expand_composites=False)
        reduced = self._reduction(flat, "DistributedGradientTape")
        return tf.nest.pack_sequence_as(grads, reduced)


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set):
    """Wraps a ``tf.GradientTape`` so that ``gradient()`` averages (or sums) the gradients
    over the ranks. Horovod's arguments; the device ones are accepted and unused, and
    every dense gradient goes in one grouped collective whatever the groups."""
    reduction = GradientReduction(compression, sparse_as_dense, op, gradient_predivide_factor,
                                  process_set)
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._reduction = reduction
    return tape
