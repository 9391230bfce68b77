"""Horovod's gradient compression: what a tensor is sent as, and back. The
framework modules add their float16 compressor to these."""


class Compressor:
    """Turns a tensor into what is sent, and the received one back."""

    @staticmethod
    def compress(tensor):
        """Returns (the tensor to send, the context decompress needs)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends the tensor as it is."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor
