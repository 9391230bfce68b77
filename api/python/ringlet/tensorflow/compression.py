"""Horovod's gradient compression for TensorFlow tensors."""

import tensorflow as tf

from ringlet.common.compression import Compressor, NoneCompressor  # noqa: F401


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16, halving the bytes on the wire; the
    context is the tensor's dtype, which decompress restores."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        return tf.cast(tensor, ctx) if ctx.is_floating else tensor


class Compression:
    """The compressors, as ``Compression.none`` and ``Compression.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
