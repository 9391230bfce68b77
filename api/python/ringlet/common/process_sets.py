"""Horovod's process sets: collectives among a subset of the ranks.

Set 0, ``global_process_set``, is the whole job. Static sets are passed to
``init(process_sets=[...])``; ``add_process_set`` and ``remove_process_set``
change them at run time and are collective over the whole job.
"""

from ringlet import _ringlet


class ProcessSet:
    """A set of ranks (global ranks); ``process_set_id`` is set once Ringlet knows it."""

    def __init__(self, ranks_or_comm):
        self.process_set_id = None
        self._comm = None
        if hasattr(ranks_or_comm, "Get_group"):
            self._comm = ranks_or_comm
            self.ranks = None
        else:
            self.ranks = sorted(int(r) for r in ranks_or_comm)

    def size(self):
        """Members in the set, or None before it is registered."""
        if self.process_set_id is None:
            return None
        return _ringlet.process_set_size(self.process_set_id)

    def rank(self):
        """This rank's index among the members (-1 when not one), or None before registration."""
        if self.process_set_id is None:
            return None
        return _ringlet.process_set_rank(self.process_set_id)

    def included(self):
        """True when this rank is a member; None before registration."""
        if self.process_set_id is None:
            return None
        return _ringlet.process_set_rank(self.process_set_id) >= 0

    def _id(self):
        if self.process_set_id is None:
            raise ValueError(f"{self} is not registered: pass it to init(process_sets=...) or "
                             f"add_process_set()")
        return self.process_set_id

    def __str__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_registered = {}


def ranks_of(process_set):
    """The global ranks of a set given by ranks or by an MPI communicator."""
    if process_set.ranks is None:
        comm = process_set._comm
        from mpi4py import MPI
        world_group = MPI.COMM_WORLD.Get_group()
        process_set.ranks = sorted(MPI.Group.Translate_ranks(
            comm.Get_group(), list(range(comm.Get_size())), world_group))
    return process_set.ranks


def on_init(static_sets):
    global_process_set.ranks = list(range(_ringlet.size()))
    _registered.clear()
    _registered[0] = global_process_set
    for i, ps in enumerate(static_sets, start=1):
        ps.process_set_id = i
        _registered[i] = ps


def on_shutdown():
    for id_, ps in list(_registered.items()):
        if id_ != 0:
            ps.process_set_id = None
    _registered.clear()


def add_process_set(process_set):
    """Registers a set (a ProcessSet or a list of ranks) on every rank; returns the ProcessSet.

    Every rank calls it, members or not, in the same order with the same ranks.
    """
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"{process_set} is registered already")
    process_set.process_set_id = _ringlet.add_process_set(ranks_of(process_set))
    _registered[process_set.process_set_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes a set on every rank; returns False for the global set or an unknown one."""
    id_ = process_set.process_set_id
    if id_ is None or id_ == 0 or id_ not in _registered:
        return False
    _ringlet.remove_process_set(id_)
    del _registered[id_]
    process_set.process_set_id = None
    return True


def id_of(process_set):
    """The core's id of a ProcessSet (or of an int id, passed through)."""
    if isinstance(process_set, int):
        return process_set
    return process_set._id()
