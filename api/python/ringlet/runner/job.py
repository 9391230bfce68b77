"""A Ringlet job made of workers another engine started (Spark tasks, Ray
actors): which rank each worker is, and the environment that makes it that
rank, as ringletrun gives it to the processes it starts.

Ranks keep each host's workers together, hosts in the order of their first
worker, so that worker 0 is rank 0 and the ring crosses each host boundary
once. Rank 0 serves the rendezvous store on a port it picks; every rank
reaches it at rank 0's address with the job's secret, which travels in the
environment only, never on a command line."""

import fcntl
import secrets
import socket
import struct


class Placement:
    """Where one worker sits in the job: its rank and its place on its host."""

    def __init__(self, rank, size, local_rank, local_size, cross_rank, cross_size):
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.cross_rank = cross_rank
        self.cross_size = cross_size

    def __repr__(self):
        return (f"Placement(rank={self.rank}, size={self.size}, local_rank={self.local_rank}, "
                f"local_size={self.local_size}, cross_rank={self.cross_rank}, "
                f"cross_size={self.cross_size})")


def place_workers(hosts):
    """``hosts[i]`` is the host of worker i; returns each worker's Placement.

    Hosts are taken in the order of their first worker and each host's
    workers in index order, so that worker 0 is always rank 0."""
    if not hosts:
        raise ValueError("a job needs at least one worker")
    order = []
    workers_on = {}
    for index, host in enumerate(hosts):
        if host not in workers_on:
            order.append(host)
            workers_on[host] = []
        workers_on[host].append(index)
    placements = [None] * len(hosts)
    rank = 0
    for cross_rank, host in enumerate(order):
        on_host = workers_on[host]
        for local_rank, index in enumerate(on_host):
            placements[index] = Placement(rank, len(hosts), local_rank, len(on_host), cross_rank,
                                          len(order))
            rank += 1
    return placements


def new_secret():
    """The job's key (64 hex digits, from the OS's CSPRNG), as ringletrun makes it."""
    return secrets.token_hex(32)


def new_job_id():
    """Names the job's shared-memory segments; unpredictable, as ringletrun's."""
    return secrets.token_hex(6)


def interface_address(name):
    """The IPv4 address of network interface ``name`` on this host."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            request = struct.pack("256s", name.encode()[:15])
            reply = fcntl.ioctl(s.fileno(), 0x8915, request)  # SIOCGIFADDR
        except OSError as e:
            available = ", ".join(n for _, n in socket.if_nameindex())
            raise ValueError(f"network interface {name!r} has no IPv4 address on "
                             f"{socket.gethostname()} ({e.strerror}); this host has: "
                             f"{available}") from None
    return socket.inet_ntoa(reply[20:24])


def free_port(address):
    """A TCP port free on ``address`` now, for rank 0's store to listen on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def chosen_interface(nics):
    """The interface a job uses of the ``nics`` the user named (Horovod's
    ``nics``, a set or list): the first in name order, as Horovod's Gloo
    jobs take one; None where none was named."""
    return sorted(nics)[0] if nics else None


def rendezvous_address(address, nics=None):
    """host:port of the store rank 0 serves: on the chosen one of ``nics``
    where the user named interfaces, else on ``address`` (how the engine
    reaches rank 0's host)."""
    if nics:
        address = interface_address(chosen_interface(nics))
    return f"{address}:{free_port(address)}"


def interface_environment(nics, environ):
    """The variables that keep a job on the interfaces the user named
    (``nics``, Horovod's set): RINGLET_NETWORK_INTERFACE, the chosen one,
    for Ringlet's TCP links, and, as horovodrun sets it, NCCL_SOCKET_IFNAME
    (all of them, comma-separated) for NCCL's sockets between hosts, which
    would otherwise pick an interface of their own. A NCCL_SOCKET_IFNAME
    that ``environ`` (what the rank starts with) holds already is the
    user's, and stays. Empty where no interface was named."""
    if not nics:
        return {}
    env = {"RINGLET_NETWORK_INTERFACE": chosen_interface(nics)}
    if not environ.get("NCCL_SOCKET_IFNAME"):
        env["NCCL_SOCKET_IFNAME"] = ",".join(sorted(nics))
    return env


def rank_environment(placement, rendezvous, secret, job_id, start_timeout=None):
    """The variables that make a process this rank of the job (RINGLET_* and
    the HOROVOD_* names Horovod's scripts read); the interfaces' come from
    ``interface_environment``."""
    env = {}
    for prefix in ("RINGLET_", "HOROVOD_"):
        env[prefix + "RANK"] = str(placement.rank)
        env[prefix + "SIZE"] = str(placement.size)
        env[prefix + "LOCAL_RANK"] = str(placement.local_rank)
        env[prefix + "LOCAL_SIZE"] = str(placement.local_size)
        env[prefix + "CROSS_RANK"] = str(placement.cross_rank)
        env[prefix + "CROSS_SIZE"] = str(placement.cross_size)
    env["RINGLET_RENDEZVOUS"] = rendezvous
    env["RINGLET_SECRET"] = secret
    env["RINGLET_JOB_ID"] = job_id
    if start_timeout is not None:
        env["RINGLET_START_TIMEOUT_SECONDS"] = str(int(start_timeout))
    return env


def without_job(environ):
    """``environ`` less the variables of any Ringlet job it was started in,
    so that a worker never joins its parent's job by mistake."""
    return {k: v for k, v in environ.items()
            if not k.startswith(("RINGLET_RANK", "RINGLET_SIZE", "RINGLET_LOCAL_", "RINGLET_CROSS_",
                                 "RINGLET_RENDEZVOUS", "RINGLET_SECRET", "RINGLET_JOB_ID",
                                 "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_",
                                 "HOROVOD_CROSS_"))}
