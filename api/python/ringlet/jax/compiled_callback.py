"""Collectives inside a compiled JAX program: a callback from the program
that writes the program's own output buffers.

JAX (0.7 and later) has ``jax.experimental.buffer_callback``: XLA calls back
into Python where the collective stands, handing it the operands and the
outputs as buffers of XLA's own memory (DLPack, ``__array__`` on the CPU).
The collective reads the operands and writes the outputs in place, so that
nothing is copied on the way in or out: with ``has_side_effect=True`` XLA
keeps the call even where its result goes unused (a rank that skipped a
collective would leave the others waiting) and never duplicates it.

``jax.experimental.io_callback(..., ordered=True)`` serves older JAX: the
same once-per-run, in-order guarantee, but JAX copies the operands into new
arrays and the results into the program's buffers (an identity callback of
32 MiB took twice as long as one that copies through ``buffer_callback``,
docs/jax.md). ``pure_callback`` is not
used: XLA may drop it when its result is unused, run it twice or move it
past another collective, and every rank must run each collective once.

Neither can be batched by ``vmap`` or differentiated.
"""

import jax
import numpy as np

try:
    from jax.experimental.buffer_callback import buffer_callback as _buffer_callback
except ImportError:  # JAX before 0.7
    _buffer_callback = None
from jax.experimental import io_callback as _io_callback

from ringlet.jax import arrays as _arrays


def writes_in_place():
    """True where the compiled program's buffers are written without copies."""
    return _buffer_callback is not None


def call(fill, result_shapes, *operands):
    """The results (``result_shapes``' structure) of ``fill(outputs, *operands)``
    run where the compiled program stands: ``fill`` writes each of ``outputs``
    (the flattened results, host arrays with ``__array__``) and returns nothing."""
    if _buffer_callback is not None:
        def body(context, outputs, *arguments):
            del context  # the device's stream: host memory has none
            fill(jax.tree_util.tree_leaves(outputs), *arguments)

        return _buffer_callback(body, result_shapes, has_side_effect=True)(*operands)

    flat_shapes, tree = jax.tree_util.tree_flatten(result_shapes)

    def body(*arguments):
        outputs = [_arrays.aligned_bytes(int(np.prod(s.shape, dtype=np.int64)) *
                                         np.dtype(s.dtype).itemsize)
                   .view(s.dtype).reshape(s.shape) for s in flat_shapes]
        fill(outputs, *arguments)
        return jax.tree_util.tree_unflatten(tree, outputs)

    return _io_callback(body, result_shapes, *operands, ordered=True)
