"""How jax arrays reach the runtime and come back, without copies where JAX
allows.

In: a jax.Array on the CPU goes to ``ringlet._ringlet`` as itself: the
bindings read its ``__dlpack__`` (a view of JAX's own buffer, waited for until
computed). Any other host array (numpy, or a compiled program's buffer that a
callback is handed) goes as a DLPack view of its memory that
``_ringlet.host_view`` labels with its dtype, since numpy cannot export
bfloat16 through DLPack.

Out: a collective that writes its result (allreduce, broadcast) writes into a
buffer allocated here (or one JAX let go of), aligned to 64 bytes, which
``jax.device_put`` then adopts without a copy (JAX's CPU client adopts host
memory only at that alignment; elsewhere it copies) as an uncommitted array,
as JAX's own are; inside a compiled program, into the program's own output
buffer. The results the
runtime allocates itself (allgather, alltoall, reducescatter) come back as
its byte arrays, relabelled the same way; JAX copies them where their address
is not so aligned.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

from ringlet import _ringlet
from ringlet.common.exceptions import InvalidArgumentError

# DLPack's type codes (dlpack.h's DLDataTypeCode).
_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6

# The dtypes the core reduces, as DLPack names them.
_REDUCIBLE = {
    jnp.dtype(jnp.float16): (_FLOAT, 16), jnp.dtype(jnp.bfloat16): (_BFLOAT, 16),
    jnp.dtype(jnp.float32): (_FLOAT, 32), jnp.dtype(jnp.float64): (_FLOAT, 64),
    jnp.dtype(jnp.int8): (_INT, 8), jnp.dtype(jnp.int16): (_INT, 16),
    jnp.dtype(jnp.int32): (_INT, 32), jnp.dtype(jnp.int64): (_INT, 64),
    jnp.dtype(jnp.uint8): (_UINT, 8), jnp.dtype(jnp.uint16): (_UINT, 16),
}
REDUCIBLE_NAMES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16",
                   "uint16", "int32", "int64")

_ALIGNMENT = 64


def reducible(dtype):
    return jnp.dtype(dtype) in _REDUCIBLE


def check_reducible(dtype, call, full_name):
    """Refuses a reduction of a dtype the core does not reduce, in the core's words."""
    if not reducible(dtype):
        raise InvalidArgumentError(
            f"ringlet: {call} on rank {_ringlet.rank()}: tensor '{full_name}' has dtype "
            f"{jnp.dtype(dtype).name}, which is not supported ({', '.join(REDUCIBLE_NAMES[:-1])} "
            f"and {REDUCIBLE_NAMES[-1]} are)")


def check_bytes_movable(dtype, call, full_name):
    """Refuses what cannot move as whole bytes (int4, float4 and other packed dtypes)."""
    dtype = jnp.dtype(dtype)
    info = (jnp.finfo(dtype) if jnp.issubdtype(dtype, jnp.floating) else
            jnp.iinfo(dtype) if jnp.issubdtype(dtype, jnp.integer) else None)
    if info is not None and info.bits != dtype.itemsize * 8:
        raise InvalidArgumentError(
            f"ringlet: {call} on rank {_ringlet.rank()}: tensor '{full_name}' has dtype "
            f"{dtype.name}, whose elements are not whole bytes")


# Output buffers that JAX has let go, for the next collective of their size:
# fresh memory costs a page fault per 4 KiB when first written, about as much
# as the collective's own copy. A buffer is free once this pool holds the only
# reference to it (the arrays JAX adopted reference it until JAX frees them).
_POOL_BYTES = 256 << 20
_pool = {}  # bytes -> [raw numpy arrays]


def aligned_bytes(nbytes):
    """``nbytes`` bytes at an address JAX adopts without a copy (their values are
    undefined): memory JAX let go of where the pool has some, else fresh."""
    kept = _pool.setdefault(nbytes, [])
    for raw in kept:
        if sys.getrefcount(raw) <= 3:  # the pool's list, this loop's name, the argument
            break
    else:
        raw = np.empty(nbytes + _ALIGNMENT, dtype=np.uint8)
        if nbytes and sum(len(v) * (k + _ALIGNMENT) for k, v in _pool.items()) + nbytes <= \
                _POOL_BYTES:
            kept.append(raw)
    start = (-raw.ctypes.data) % _ALIGNMENT
    return raw[start:start + nbytes]


def labelled(data, dtype, shape):
    """Host bytes (a contiguous numpy array) as a DLPack array of ``dtype`` (one the
    core reduces) and ``shape``, without a copy."""
    code, bits = _REDUCIBLE[jnp.dtype(dtype)]
    flat = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return _ringlet.host_view(flat, code, bits, [int(s) for s in shape])


def output(dtype, shape):
    """A writable host array of ``dtype`` and ``shape`` for a collective's result
    (pass ``writable(it)`` to the bindings), which ``to_jax`` adopts once the
    collective wrote it."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * jnp.dtype(dtype).itemsize
    return aligned_bytes(nbytes).view(jnp.dtype(dtype)).reshape(shape)


def bytes_of(array):
    """The bytes of a host array (numpy, or a compiled program's buffer), as a
    writable uint8 view of its memory."""
    return np.asarray(array).reshape(-1).view(np.uint8)


def writable(array):
    """A host array of a dtype the core reduces as the bindings' output: a labelled
    view of its own memory."""
    return labelled(bytes_of(array), array.dtype, array.shape)


def fill(output, data):
    """Copies the runtime's result bytes into ``output`` (a host array)."""
    target = bytes_of(output)
    if target.size:
        target[...] = data.reshape(-1)


def on_cpu(array, call, full_name):
    """Refuses a jax array outside host memory, by name."""
    devices = array.devices() if isinstance(array, jax.Array) else ()
    for device in devices:
        if device.platform != "cpu":
            raise InvalidArgumentError(
                f"ringlet: {call} on rank {_ringlet.rank()}: tensor '{full_name}' lives on "
                f"{device}; ringlet.jax serves arrays in host memory (jax.device_put(x, "
                f"jax.devices('cpu')[0]))")


def as_input(array, call, full_name):
    """What the bindings take for ``array`` (of a dtype the core reduces): a jax.Array
    as itself (DLPack, no copy), a numpy array as a labelled view of its memory."""
    if isinstance(array, jax.Array):
        on_cpu(array, call, full_name)
        return array
    array = np.ascontiguousarray(array)
    return labelled(array, array.dtype, array.shape)


def as_bytes(array, call, full_name):
    """An array of any dtype as its bytes (uint8, one more axis of its item size), for
    the collectives that only move data: (the bindings' input, host bytes)."""
    check_bytes_movable(array.dtype, call, full_name)
    if isinstance(array, jax.Array):
        on_cpu(array, call, full_name)
    host = np.ascontiguousarray(np.asarray(array))
    return host.reshape(host.shape + (1,)).view(np.uint8)


def to_jax(array):
    """A host array (numpy, of a jax dtype) as a jax.Array, adopted without a copy
    where aligned. Uncommitted, as ``jnp.asarray`` makes arrays: a jit-compiled
    function that takes it reuses what it compiled for arrays made by JAX, where a
    committed one (what ``jax.dlpack.from_dlpack`` gives) makes it compile again."""
    return jax.device_put(array)


def from_bytes(data, dtype, shape):
    """The runtime's result bytes (numpy uint8) as a jax array of ``dtype`` and ``shape``."""
    if data is None or data.size == 0:
        return jnp.zeros(shape, dtype)
    if reducible(dtype):
        return to_jax(np.ascontiguousarray(data).reshape(-1).view(jnp.dtype(dtype))
                      .reshape(shape))
    # Moved as bytes: numpy relabels them (JAX takes no bool or complex through a
    # byte view's DLPack), then JAX copies them in.
    return jnp.asarray(data.view(jnp.dtype(dtype)).reshape(shape))
