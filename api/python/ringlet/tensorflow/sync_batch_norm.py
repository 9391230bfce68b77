"""SyncBatchNormalization: batch normalization whose batch statistics are those
of every rank's batch together while training."""

import tensorflow as tf

from ringlet import _ringlet
from ringlet.common.process_sets import global_process_set
from ringlet.tensorflow.mpi_ops import Sum, _allreduce, _elastic_job, _size_of


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    """A Keras BatchNormalization (not fused) whose training-time mean and variance
    are averaged over the ranks: each rank's mean and mean of squares count equally,
    and the variance is the mean of squares less the squared mean."""

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True.")
        if not kwargs.get("name"):
            kwargs["name"] = "sync_batch_normalization"
        super().__init__(fused=fused, **kwargs)

    def _moments(self, inputs, reduction_axes, keep_dims, **kwargs):
        mean, variance = super()._moments(inputs, reduction_axes, keep_dims=keep_dims, **kwargs)
        # In an elastic job the ranks are counted when the layer runs (a layer
        # traced in one round may run in the next, of another size), so the
        # reduction is always there; elsewhere, one rank skips it.
        if not _elastic_job() and _ringlet.size() == 1:
            return mean, variance
        stats = tf.stack([mean, variance + tf.math.square(mean)])
        ranks = _size_of(global_process_set, stats.dtype)
        mean, mean_of_squares = tf.unstack(_allreduce(stats, op=Sum) / ranks)
        return mean, mean_of_squares - tf.math.square(mean)
