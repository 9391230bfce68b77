"""What every framework module shares about asynchronous collectives: the
names of unnamed ones, and the handles in flight with what completes them."""

import itertools
import threading

from ringlet import _ringlet
from ringlet.common import basics
from ringlet.common import exceptions
from ringlet.common.process_sets import id_of

# Unnamed collectives are numbered per process set: the members of a set
# call the same sequence, whatever else each runs outside it.
_noname_counters = {}
basics.call_at_init(_noname_counters.clear)

_lock = threading.Lock()
# handle -> (its members' core handles, a function of their results giving
# the result, the buffers the core reads or writes until then, kept alive
# here, and the members' outcomes so far).
_in_flight = {}
# Handles of a runtime that has gone (a wait a signal interrupted, never
# synchronized again) must not shadow the next runtime's.
basics.call_at_init(_in_flight.clear)


# Synchronous calls a signal interrupted, by (call, name or None, process set
# id) -> (handle, what the call was given). The collective stays in flight
# and the other ranks submit it once: the next such call waits for it rather
# than submitting it a second time.
_interrupted = {}
basics.call_at_init(_interrupted.clear)


def _next_unnamed(process_set):
    counter = _noname_counters.setdefault(id_of(process_set), itertools.count())
    return next(counter)


def op_name(prefix, name, process_set):
    """The collective's name on the wire: "<prefix>.<name>" or "<prefix>.noname.<n>"."""
    if name is None:
        return f"{prefix}.noname.{_next_unnamed(process_set)}"
    return f"{prefix}.{name}"


def group_base(name, process_set):
    """The shared prefix of a grouped collective's members' names."""
    return "grouped." + (name if name is not None else f"noname.{_next_unnamed(process_set)}")


def register(handle, finish, *buffers):
    """Remembers how to complete ``handle``, and keeps ``buffers`` alive until then."""
    with _lock:
        _in_flight[handle] = ((handle,), lambda results: finish(*results[0]), buffers, {})
    return handle


def register_group(handles, finish, *buffers):
    """One handle for collectives started together (Horovod's grouped ops).

    It is the first member's number; ``poll`` is true once every member is
    done, and ``synchronize`` waits for all of them and returns
    ``finish(results)`` with each member's (bytes, shape, received splits).
    """
    members = tuple(handles)
    with _lock:
        _in_flight[members[0]] = (members, finish, buffers, {})
    return members[0]


def poll(handle):
    """True when ``synchronize(handle)`` would return without waiting."""
    with _lock:
        entry = _in_flight.get(handle)
    if entry is None:
        return _ringlet.poll(handle)
    # Members an interrupted synchronize() already released are done.
    members, _, _, outcomes = entry
    return all(h in outcomes or _ringlet.poll(h) for h in members)


def synchronize(handle):
    """Waits for an asynchronous collective and returns its result.

    Raises the collective's error (a HorovodInternalError subclass for
    failures across ranks) on every rank where it failed. A handle
    synchronized already gives None, as in Horovod. The wait serves Python's
    signals: a handler's exception (KeyboardInterrupt, ...) propagates and
    leaves the handle pending, to be synchronized again.
    """
    with _lock:
        entry = _in_flight.get(handle)
    if entry is None:
        return None
    members, finish, _buffers, outcomes = entry
    # Every member is waited for before any error is raised: the buffers
    # stay alive (in _buffers) until the core is done with all of them. A
    # signal handler's exception stops the wait with the entry kept, and
    # what completed meanwhile in `outcomes`: the next call waits for the rest.
    for h in members:
        if h not in outcomes:
            try:
                outcomes[h] = (_ringlet.synchronize(h), None)
            except exceptions.FAILURES as e:  # the core released it with its failure
                outcomes[h] = (None, e)
    with _lock:
        _in_flight.pop(handle, None)
    for _, error in outcomes.values():
        if error is not None:
            raise error
    return finish([outcomes[h][0] for h in members])


def wait_resuming(key, given, start):
    """What a synchronous call returns: ``synchronize(start())``, unless a signal
    interrupted the call of the same ``key`` (call, name or None, process set id)
    with the same ``given`` (a description of its tensors and arguments): then
    the result of that call's collective, still in flight, without submitting
    it a second time. A signal that interrupts this wait leaves the collective
    to the next such call. ``given`` is a function that describes them: it runs
    only where a call was interrupted, never on the way of one that was not.
    """
    with _lock:
        pending = _interrupted.pop(key, None)
    # A call given other tensors is another collective: it is submitted, and
    # meets the interrupted one's name in flight if it has one.
    handle = pending[0] if pending is not None and pending[1] == given() else start()
    try:
        return synchronize(handle)
    finally:
        with _lock:
            if handle in _in_flight:  # interrupted, not failed: resumed by the next call
                _interrupted[key] = (handle, given())


def wait_all(handles, wait):
    """``[wait(h) for h in handles]``, every handle waited for even after one fails,
    then the first failure raised: none is left in the core's table with its
    buffers held."""
    results, failure = [], None
    for h in handles:
        try:
            results.append(wait(h))
        except exceptions.FAILURES as e:
            results.append(None)
            failure = failure or e
    if failure is not None:
        raise failure
    return results
