"""The exceptions Ringlet raises, under the names Horovod users catch.

Failures that involve other ranks (a mismatch across ranks, a lost peer, a
timeout, a shutdown before the collective ran) are ``HorovodInternalError``
subclasses, a ``RuntimeError`` as in Horovod, so that ``except
HorovodInternalError`` keeps working. A wrong call on this rank (a duplicate
name in flight, an unsupported dtype, a non-contiguous tensor, a call before
``init()``) is a ``ValueError``. Every exception carries ``code``, the value of
``ringlet::ErrorCode``.
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


class NotInitializedError(ValueError):
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


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, NotInitializedError, ConfigError, PeerLostError,
    CollectiveTimeoutError, HorovodInternalError, MismatchError, AbortedError)}


def exception_for_code(code):
    """The class raised for a ringlet::ErrorCode value."""
    return _BY_CODE.get(code, HorovodInternalError)


def get_version_mismatch_message(name, version, installed_version):
    """Says that a framework changed under an extension built against it."""
    return (f"ringlet's {name} support was built against {name} {version}, but {name} "
            f"{installed_version} is installed now; rebuild ringlet against it")
