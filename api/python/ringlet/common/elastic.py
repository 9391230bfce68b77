"""Elastic training, Horovod's API: a State that commits, restores and
synchronizes what training needs, and run_fn, the loop that keeps a training
function going while workers leave and join (ringletrun --min-np/--max-np
--host-discovery-script starts such jobs).

The rules, Horovod's:
- run_fn(func, reset) calls ``state.sync()`` (rank 0's committed state to
  every rank), then ``func(state, ...)``;
- a collective that fails because a worker died raises
  HorovodInternalError: the state rolls back to its last commit
  (``state.restore()``), the job re-forms without the dead worker (reset:
  shutdown(), then init() in the driver's next round), syncs, and func
  runs again;
- ``state.commit()`` saves the state and checks with the driver whether
  hosts changed; if they did, every rank raises HostsUpdatedInterrupt at the
  same commit (rank 0's answer is broadcast), the job re-forms with the new
  workers, and they receive the state by the sync. Only removed hosts skip
  the sync (the state is everywhere already)."""

import functools

from ringlet.common import basics
from ringlet.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt, InitError
from ringlet.runner import elastic_worker
from ringlet.runner.failures import caused_by_another_rank


class State:
    """What training keeps across resets. ``bcast_object`` broadcasts a
    Python object from rank 0; ``get_rank`` returns this worker's rank."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Has each of ``callbacks`` called after every reset (a worker added
        or removed), e.g. to scale the learning rate to the new size."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (in host memory) and raises HostsUpdatedInterrupt
        where hosts changed. Costly for large states: commit every few
        batches rather than every one."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt, on every rank at once, when the
        driver's hosts changed since this round began."""
        change = elastic_worker.hosts_changed() if elastic_worker.active() else None
        change = self._bcast_object(change)
        if change is not None:
            raise HostsUpdatedInterrupt(skip_sync=change == "removed")

    def save(self):
        raise NotImplementedError("a State subclass saves its own values")

    def restore(self):
        raise NotImplementedError("a State subclass restores its own values")

    def sync(self):
        raise NotImplementedError("a State subclass synchronizes its own values")

    def reset(self):
        """Called after a reset, before the sync; subclasses may adjust."""


class ObjectState(State):
    """State made of plain Python objects, given as keyword arguments and
    kept as attributes of the same names."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)


def reset():
    """Re-forms the job: this worker leaves the round and joins the next."""
    basics.shutdown()
    basics.init()


def run_fn(func, reset=reset):
    """``func(state, *args, **kwargs)`` kept running through resets (see the
    module's rules); ``reset`` re-forms the job (shutdown, then init)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            _reset_until_formed(reset)
            state.on_reset()

    return wrapper


def _reset_until_formed(reset):
    """reset(), again while it fails because another worker died while the
    round formed (the driver then forms the next one without it)."""
    while True:
        try:
            reset()
            return
        except InitError as e:
            if not caused_by_another_rank(e):
                raise
