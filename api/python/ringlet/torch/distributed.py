"""The ``ringlet`` backend of ``torch.distributed``.

``import ringlet.torch`` (or ``import ringlet.torch.distributed``) registers
it, after which ``torch.distributed.init_process_group("ringlet")`` runs the
process group's collectives on Ringlet (docs/torch-distributed.md).

Ringlet's runtime is one per process. The backend's creator starts it unless
the program did (``hvd.init()``): under ``ringletrun`` (or another launcher
that sets ``RINGLET_RENDEZVOUS``) from the launcher's variables, otherwise
through PyTorch's own store (``torchrun``, ``env://``, ``tcp://``,
``file://``): rank 0 chooses where Ringlet's store listens, a fresh secret
and a job id, and hands them to the others through PyTorch's store.

``init_method="ringlet://"`` is the other way round, for jobs that
``ringletrun`` started (no ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
``WORLD_SIZE`` needed): Ringlet meets the ranks first and rank 0 serves
PyTorch's store on a free port.
"""

import datetime
import functools
import json
import os
import secrets
import socket

import torch

_NAME = "ringlet"
# The runtime now running was started by this module (the creator or
# ringlet://), so the backend stops it when the last process group on it is
# destroyed; any init() resets it (_forget_start), this module's own sets it
# after.
_started_here = False


def _forget_start():
    global _started_here
    _started_here = False


def _load_extension():
    """ringlet.torch._c10d, once it is known to match the imported torch."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "_c10d_torch_version.txt")) as f:
            built = f.read().strip()
    except OSError:
        raise RuntimeError(
            "ringlet: this installation has no torch.distributed backend: it was built without "
            "PyTorch (build with torch installed, or pip install --no-build-isolation "
            "'.[torch]')") from None
    if built != torch.__version__:
        raise RuntimeError(
            f"ringlet: the ringlet backend was built against torch {built}, but torch "
            f"{torch.__version__} is imported: rebuild ringlet against this torch")
    from ringlet.torch import _c10d
    return _c10d


def _host_name():
    return os.environ.get("RINGLET_HOSTNAME") or socket.gethostname()


def _routable_address():
    """An address of this host that the other hosts reach: the one that routes
    to MASTER_ADDR where torchrun gave one, else the host name's."""
    master = os.environ.get("MASTER_ADDR")
    if master:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((master, 9))  # no packet is sent: this only picks the route
                address = s.getsockname()[0]
                if not address.startswith("127."):
                    return address
        except OSError:
            pass
    return socket.gethostbyname(socket.gethostname())


def _free_port(address):
    """A TCP port free right now on `address`; Ringlet's store binds it moments
    later (the usual window of choosing a port before its server exists)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def _meet_through_store(store, rank, size):
    """Ringlet's launch variables, agreed through PyTorch's store."""
    # A store may outlive a process group (torchrun's agent store): each
    # initialization of the same group takes its own keys.
    generation = (store.add("ringlet/arrived", 1) - 1) // size
    prefix = f"ringlet/{generation}/"
    store.set(f"{prefix}host/{rank}", _host_name())
    if rank == 0:
        hosts = {store.get(f"{prefix}host/{r}").decode() for r in range(size)}
        address = "127.0.0.1" if len(hosts) == 1 else _routable_address()
        launch = {"rendezvous": f"{address}:{_free_port(address)}",
                  "secret": secrets.token_hex(32),
                  "job_id": "torch-" + secrets.token_hex(8)}
        store.set(f"{prefix}launch", json.dumps(launch))
    else:
        launch = json.loads(store.get(f"{prefix}launch").decode())
    env = {"RINGLET_RANK": str(rank), "RINGLET_SIZE": str(size),
           "RINGLET_RENDEZVOUS": launch["rendezvous"], "RINGLET_SECRET": launch["secret"],
           "RINGLET_JOB_ID": launch["job_id"]}
    # torchrun's local rank and size are hints that Ringlet checks against
    # the host names; it derives them itself where they are absent.
    if os.environ.get("LOCAL_RANK") and os.environ.get("LOCAL_WORLD_SIZE"):
        env["RINGLET_LOCAL_RANK"] = os.environ["LOCAL_RANK"]
        env["RINGLET_LOCAL_SIZE"] = os.environ["LOCAL_WORLD_SIZE"]
    return env


def _start_ringlet(store, rank, size):
    from ringlet.common import basics
    if os.environ.get("RINGLET_RENDEZVOUS"):
        # ringletrun (or mpirun -x, Spark, Ray): the launcher's variables.
        basics.init()
        return
    env = _meet_through_store(store, rank, size)
    # Ringlet reads its launch from the environment; the secret is not left
    # there for child processes to inherit.
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        basics.init()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _create_backend(opts, backend_options=None):
    """torch.distributed's creator (extended API) of a ringlet process group."""
    global _started_here
    c10d = _load_extension()
    from ringlet import _ringlet
    rank, size = opts.group_rank, opts.group_size
    owns = False
    if not _ringlet.is_initialized():
        _start_ringlet(opts.store, rank, size)
        _started_here = owns = True
    elif _started_here:
        owns = True
    world = _ringlet.size()
    ranks = list(opts.global_ranks_in_group)
    if not ranks:  # the default group: torch's world must be Ringlet's
        if rank != _ringlet.rank() or size != world:
            raise RuntimeError(
                f"ringlet: torch.distributed says rank {rank} of {size}, but Ringlet's runtime "
                f"is rank {_ringlet.rank()} of {world} (RANK and WORLD_SIZE must agree with the "
                "launch that started Ringlet: RINGLET_RANK and RINGLET_SIZE, or hvd.init()'s)")
        ranks = list(range(size))
    if ranks == list(range(world)):
        process_set = 0
    else:
        process_set = _registered_set(ranks)
        if process_set is None:
            raise NotImplementedError(
                f"ringlet: process group {opts.group_id!r} of ranks {ranks} has no Ringlet "
                "process set: sets are added by every rank together, when new_group() is called "
                "on every rank with the ranks sorted (not with use_local_synchronization=True), "
                "after the default group started Ringlet")
    # The group's timeout is not the collectives' here: Ringlet's own deadlines
    # (RINGLET_TIMEOUT_SECONDS, RINGLET_STALL_TIMEOUT_SECONDS) end every wait.
    return c10d.Backend(rank=rank, size=size, group_name=str(opts.group_id),
                        process_set=process_set, global_ranks=ranks, owns_runtime=owns)


def _registered_set(ranks):
    """The id of the Ringlet process set of exactly `ranks`, or None."""
    from ringlet.common import process_sets
    for id_, ps in process_sets._registered.items():
        if ps.ranks == ranks:
            return id_
    return None


def _adding_process_sets(new_group_with_tag):
    """torch's _new_group_with_tag (behind new_group, new_subgroups and
    DeviceMesh), adding the Ringlet process set of a ringlet group of some of
    the ranks first.

    A Ringlet process set is added by every rank of the job together, but
    torch.distributed calls a backend's creator only on the group's members.
    new_group() itself is called on every rank (unless
    use_local_synchronization=True), so this is where every rank adds the set.
    Sets stay until Ringlet stops: removing one is collective over the job
    too, and a group is destroyed by its members alone.
    """
    import inspect
    signature = inspect.signature(new_group_with_tag)

    @functools.wraps(new_group_with_tag)
    def wrapper(*args, **kwargs):
        import torch.distributed as dist
        from ringlet import _ringlet
        from ringlet.common import process_sets
        call = signature.bind(*args, **kwargs)
        ranks = call.arguments.get("ranks")
        if (ranks is not None and _ringlet.is_initialized() and dist.is_initialized()
                and _NAME in str(call.arguments.get("backend") or dist.get_backend()).lower()
                and not call.arguments.get("use_local_synchronization", False)):
            members = [int(r) for r in ranks]
            if (members == sorted(members) or call.arguments.get("sort_ranks", True)) and \
                    sorted(set(members)) != list(range(_ringlet.size())):
                members = sorted(set(members))
                if _registered_set(members) is None:
                    process_sets.add_process_set(members)
        return new_group_with_tag(*args, **kwargs)

    wrapper._ringlet_adds_process_sets = True
    return wrapper


def _ringlet_rendezvous(url, timeout=datetime.timedelta(minutes=30), **kwargs):
    """init_method="ringlet://": Ringlet meets the ranks, rank 0 serves
    PyTorch's store on a free port and tells the others where."""
    global _started_here
    from urllib.parse import parse_qs, urlparse
    from torch.distributed import TCPStore
    from ringlet import _ringlet
    from ringlet.common import basics
    from ringlet.torch.functions import allgather_object, broadcast_object
    if not _ringlet.is_initialized():
        basics.init()
        _started_here = True
    rank, size = _ringlet.rank(), _ringlet.size()
    # init_process_group(rank=..., world_size=...) arrive in the query. Every
    # rank learns of every rank's disagreement and raises alike: a rank left
    # to build PyTorch's store alone would wait out the group's timeout.
    query = {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}
    mine = [f"{name}={query[name]}" for name, ours in (("rank", rank), ("world_size", size))
            if name in query and int(query[name]) != ours]
    disagreeing = [f"rank {r} was given {', '.join(given)}"
                   for r, given in enumerate(allgather_object(mine, name="torch.rendezvous.check"))
                   if given]
    if disagreeing:
        raise ValueError(
            f"ringlet: init_process_group's arguments disagree with Ringlet's launch, which "
            f"makes these processes ranks 0 to {size - 1} of {size}: {'; '.join(disagreeing)}")
    if rank == 0:
        host = "127.0.0.1" if _ringlet.local_size() == size else _routable_address()
        store = TCPStore(host, 0, size, True, timeout, wait_for_workers=False)
        broadcast_object((host, store.port), root_rank=0, name="torch.rendezvous")
    else:
        host, port = broadcast_object(None, root_rank=0, name="torch.rendezvous")
        store = TCPStore(host, port, size, False, timeout)
    yield (store, rank, size)
    raise RuntimeError("ringlet:// rendezvous cannot be used again: initialize anew")


def _launched_for_ringlet():
    """True where Ringlet can start with no help from PyTorch's store: it runs
    already (hvd.init()), or a launcher gave its rendezvous (ringletrun, Spark,
    Ray) or meets the ranks through MPI (mpirun, srun)."""
    from ringlet import _ringlet
    from ringlet.common import basics
    return (_ringlet.is_initialized() or bool(os.environ.get("RINGLET_RENDEZVOUS"))
            or basics.mpi_enabled())


def _env_or_launcher_rendezvous(env_rendezvous):
    """torch's env:// (init_process_group's default), falling back to
    ringlet:// where MASTER_ADDR is not set and Ringlet's launcher started
    the job: `ringletrun -np 4 python train.py` with a plain
    init_process_group("ringlet") (or "gloo") then needs no torchrun
    variables."""
    def handler(url, timeout=datetime.timedelta(minutes=30), **kwargs):
        if not os.environ.get("MASTER_ADDR") and _launched_for_ringlet():
            return _ringlet_rendezvous(url, timeout=timeout, **kwargs)
        return env_rendezvous(url, timeout=timeout, **kwargs)

    handler._ringlet_falls_back = True
    return handler


def register():
    """Registers the backend name "ringlet" with torch.distributed (once)."""
    from ringlet.common import basics
    if _forget_start not in basics._init_callbacks:
        basics.call_at_init(_forget_start)
    import torch.distributed as dist
    # torch 1.x creates third-party backends another way; ringlet.torch's
    # Horovod API still serves it.
    if int(torch.__version__.split(".")[0]) < 2 or not dist.is_available():
        return
    if _NAME in dist.Backend.backend_list:
        return
    # CUDA tensors are not served yet: the backend is "cpu" only, so that
    # "cpu:ringlet,cuda:nccl" takes CUDA tensors elsewhere.
    try:
        dist.Backend.register_backend(_NAME, _create_backend, extended_api=True,
                                      devices=["cpu"])
    except TypeError:  # a torch without `devices`
        dist.Backend.register_backend(_NAME, _create_backend, extended_api=True)
    import torch.distributed.distributed_c10d as c10d_python
    original = getattr(c10d_python, "_new_group_with_tag", None)
    if original is not None and not getattr(original, "_ringlet_adds_process_sets", False):
        c10d_python._new_group_with_tag = _adding_process_sets(original)
    from torch.distributed.rendezvous import register_rendezvous_handler
    try:
        register_rendezvous_handler("ringlet", _ringlet_rendezvous)
    except RuntimeError:
        pass  # registered already
    import importlib
    handlers = getattr(importlib.import_module("torch.distributed.rendezvous"),
                       "_rendezvous_handlers", None)
    env_rendezvous = handlers.get("env") if isinstance(handlers, dict) else None
    if env_rendezvous is not None and not getattr(env_rendezvous, "_ringlet_falls_back", False):
        handlers["env"] = _env_or_launcher_rendezvous(env_rendezvous)


register()
