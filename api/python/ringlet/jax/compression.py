"""Horovod's gradient compression for jax arrays (in and out of jit)."""

import jax.numpy as jnp

from ringlet.common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Sends floating-point arrays as float16, halving the bytes on the wire; the
    context is the array's dtype, which decompress() casts back to."""

    @staticmethod
    def compress(tensor):
        dtype = jnp.asarray(tensor).dtype
        if jnp.issubdtype(dtype, jnp.floating):
            return jnp.asarray(tensor).astype(jnp.float16), dtype
        return tensor, dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is not None and jnp.issubdtype(ctx, jnp.floating):
            return tensor.astype(ctx)
        return tensor


class Compression:
    """The compressors, as ``Compression.none`` and ``Compression.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
