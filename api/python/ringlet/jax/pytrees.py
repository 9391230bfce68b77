"""Pytrees as groups of named tensors, and the check that every rank passed
the same one.

Each leaf's tensor is named by its path in the tree (``params.dense.w``,
``layers.0.b``), so that what negotiation reports about a tensor (a shape or
dtype that differs between ranks) names the leaf. A leaf that some ranks have
and others lack would leave its collective waiting on the others until the
stall timeout: before a pytree's collective, the members of the set
therefore allgather a digest of their leaves (paths, dtypes, shapes; eight
bytes), and where the digests differ every member raises one MismatchError
naming the first leaf that differs and what each rank has there.
"""

import hashlib

import jax
import jax.numpy as jnp
import numpy as np

from ringlet import _ringlet
from ringlet.common.exceptions import MismatchError
from ringlet.common.process_sets import id_of as _set_id


def _key_text(key):
    for attribute in ("key", "name", "idx"):  # DictKey, GetAttrKey, SequenceKey, ...
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def leaf_names(tree):
    """(leaves, their names, treedef): each leaf named by its path, joined by dots."""
    with_paths, treedef = jax.tree_util.tree_flatten_with_path(tree)
    names, seen = [], set()
    for index, (path, _) in enumerate(with_paths):
        name = ".".join(_key_text(k) for k in path) or "leaf"
        if name in seen:  # keys that print alike ("a.b" beside a -> b)
            name = f"{name}#{index}"
        seen.add(name)
        names.append(name)
    return [leaf for _, leaf in with_paths], names, treedef


def describe(leaf):
    """A leaf as the check compares it: dtype and shape, e.g. ``float32[3,4]``."""
    return f"{jnp.dtype(leaf.dtype).name}[{','.join(str(int(d)) for d in np.shape(leaf))}]"


def _digest(names, leaves):
    text = "\n".join(f"{n} {describe(x)}" for n, x in zip(names, leaves))
    return np.frombuffer(hashlib.blake2b(text.encode(), digest_size=8).digest(), dtype=np.int64)


def check_same_tree(call, base, names, leaves, process_set):
    """Raises MismatchError on every member of ``process_set`` unless each passed the
    same leaves (names, dtypes, shapes) to the collective ``call`` named ``base``."""
    from ringlet import numpy as ringlet_numpy  # the collectives on numpy arrays

    digests = ringlet_numpy.allgather(_digest(names, leaves), f"{base}.tree", process_set)
    if np.all(digests == digests[0]):
        return
    mine = {n: describe(x) for n, x in zip(names, leaves)}
    everyone = ringlet_numpy.allgather_object(mine, f"{base}.tree.leaves", process_set)
    ranks = _ringlet.process_set_ranks(_set_id(process_set))
    order = []
    for leaves_of_rank in everyone:
        order.extend(n for n in leaves_of_rank if n not in order)
    differing = [n for n in order if len({held.get(n) for held in everyone}) > 1]
    first = differing[0]
    by_value = {}
    for rank, held in zip(ranks, everyone):
        by_value.setdefault(held.get(first, "missing"), []).append(rank)
    what = "; ".join(
        f"{value} on rank{'s' if len(rs) > 1 else ''} {', '.join(str(r) for r in rs)}"
        for value, rs in by_value.items())
    more = f" ({len(differing) - 1} more leaves differ)" if len(differing) > 1 else ""
    raise MismatchError(
        f"ringlet: {call} '{base}' on rank {_ringlet.rank()}: the ranks passed different "
        f"pytrees: leaf '{first}' is {what}{more}")
