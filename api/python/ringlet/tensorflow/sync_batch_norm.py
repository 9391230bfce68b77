"""SyncBatchNormalization: batch normalization whose batch statistics are those
of every rank's batch together while training."""

import tensorflow as tf

from ringlet import _ringlet
from ringlet.tensorflow.mpi_ops import Sum, _allreduce


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
        ranks = _ringlet.size()
        if ranks == 1:
            return mean, variance
        stats = tf.stack([mean, variance + tf.math.square(mean)])
        mean, mean_of_squares = tf.unstack(_allreduce(stats, op=Sum) / ranks)
        return mean, mean_of_squares - tf.math.square(mean)
