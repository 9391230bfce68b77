"""horovod.tensorflow.util's helpers, which Horovod's scripts and tests reach for."""

import tensorflow as tf


def _executing_eagerly():
    """True when TensorFlow runs ops at once (not while building a graph)."""
    return tf.executing_eagerly()


def _make_subgraph(f):
    """``f`` as a ``tf.function``."""
    return tf.function(f)


def _cache(f):
    """``f`` memoized on its (hashable) arguments and on whether TensorFlow runs
    eagerly at the call."""
    results = {}

    def cached(*args):
        key = (args, _executing_eagerly())
        if key not in results:
            results[key] = f(*args)
        return results[key]
    return cached


def ref_of(variable):
    """A hashable reference to a variable (or tensor) by identity: its ``ref()``; for
    a Keras 3 variable, which has none, that of the tf.Variable it holds."""
    if hasattr(variable, "ref"):
        return variable.ref()
    value = getattr(variable, "value", None)
    if hasattr(value, "ref"):
        return value.ref()
    raise TypeError(f"{type(variable).__name__} is not a TensorFlow variable or tensor")


def vars_to_refs(variables):
    """Variables (in nested lists) as hashable references, in nested tuples."""
    if isinstance(variables, list):
        return tuple(vars_to_refs(v) for v in variables)
    return ref_of(variables)


def refs_to_vars(refs):
    """The inverse of vars_to_refs."""
    if isinstance(refs, tuple):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()
