"""Horovod's gradient compression for torch tensors."""

import torch

from ringlet.common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16, halving the bytes on the wire; the
    context is the tensor's dtype, which decompress() casts back to."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is not None and ctx.is_floating_point:
            return tensor.to(ctx)
        return tensor


class Compression:
    """The compressors, as ``Compression.none`` and ``Compression.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
