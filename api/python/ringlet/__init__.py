"""Ringlet: Horovod's collective layer, rebuilt.

Import the framework module a Horovod script imports: ``ringlet.torch``,
``ringlet.tensorflow``, ``ringlet.keras`` or ``ringlet.numpy``.
"""

__version__ = "0.1.0"
