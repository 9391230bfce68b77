"""The exceptions Ringlet raises, under the names Horovod users catch.

Each failure raises the class Horovod raises for the same cause, or a
subclass of it, so that ``except`` clauses written for Horovod keep working:

- a collective that failed across ranks (the ranks disagree, a peer died or
  did not answer, the job shut down first) is a ``HorovodInternalError``, a
  ``RuntimeError``, as Horovod's ``synchronize()`` raises it;
- a wrong call on this rank (a duplicate name in flight, an unsupported
  dtype, a non-contiguous tensor, an unknown process set) is a
  ``ValueError``, as Horovod's submission raises it;
- a call before ``init()`` is both: Horovod's queries raise ``ValueError``
  and its collectives ``HorovodInternalError``;
- ``init()`` that fails raises a ``ValueError`` (a ``ConfigError`` for a bad
  setting, an ``InitError`` for the rest), as Horovod's ``init()`` does.

Every exception carries ``code``, the value of ``ringlet::ErrorCode``.
TensorFlow's errors for the same causes are ringlet.tensorflow.errors'.
"""


class HorovodInternalError(RuntimeError):
    """A collective failed across ranks; the job cannot go on as it is."""

    code = 6


class HostsUpdatedInterrupt(RuntimeError):
    """The set of hosts changed (elastic jobs); raised by elastic drivers."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


class HorovodVersionMismatchError(ImportError):
    """A framework extension was built against another framework version."""

    def __init__(self, name, version, found_version):
        super().__init__(
            f"{name} was built with version {version} but version {found_version} is installed; "
            f"reinstall ringlet")
        self.name = name
        self.version = version
        self.found_version = found_version


class InvalidArgumentError(ValueError):
    """This rank's call was wrong: fix the call."""

    code = 1


class NotInitializedError(ValueError, HorovodInternalError):
    """Called before init() or after shutdown()."""

    code = 2


class ConfigError(ValueError):
    """A bad environment variable or launch; the message names it."""

    code = 3


class PeerLostError(HorovodInternalError):
    """A rank died or closed its links."""

    code = 4


class CollectiveTimeoutError(HorovodInternalError):
    """A rank did not answer in time."""

    code = 5


class MismatchError(HorovodInternalError):
    """The ranks disagree about a collective (dtype, shape, op, root, ...)."""

    code = 7


class AbortedError(HorovodInternalError):
    """The job was shut down (by a rank or the stall check) before the collective ran."""

    code = 8


class InitError(ValueError):
    """init() could not start Ringlet on this rank: a rank did not arrive in
    time or died during the rendezvous, or the rendezvous failed. ``code``
    says which (5: a timeout, 4: a lost peer, 6: anything else)."""

    code = 6


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, NotInitializedError, ConfigError, PeerLostError,
    CollectiveTimeoutError, HorovodInternalError, MismatchError, AbortedError)}

# Every class raised for a ringlet::ErrorCode: what the library raised, as
# opposed to what a Python signal handler or the user's code did.
FAILURES = tuple(_BY_CODE.values()) + (InitError,)


def exception_for_code(code, during_init=False):
    """The class raised for a ringlet::ErrorCode value; ``during_init``: raised by init()."""
    cls = _BY_CODE.get(code, HorovodInternalError)
    if during_init and not issubclass(cls, ValueError):
        return InitError
    return cls


def get_version_mismatch_message(name, version, installed_version):
    """Says that a framework changed under an extension built against it."""
    return (f"ringlet's {name} support was built against {name} {version}, but {name} "
            f"{installed_version} is installed now; rebuild ringlet against it")
