"""A worker's side of an elastic job: before each init() it asks the driver
for its place in the next round (rank, size, the round's rendezvous, secret
and job id) and takes it into its environment; rank 0 of a round picks the
port of the round's store and tells the driver. It also asks the driver
whether the hosts changed since its round began (State.check_host_updates).

Active where the driver set RINGLET_ELASTIC_DRIVER (host:port),
RINGLET_ELASTIC_KEY and RINGLET_ELASTIC_WORKER (this worker's host:slot)."""

import os
import threading

from ringlet.runner import elastic_wire, job


def active():
    return "RINGLET_ELASTIC_DRIVER" in os.environ


class _Driver:
    """The connection to the driver, made once, serialized by a lock."""

    def __init__(self):
        self.address = os.environ["RINGLET_ELASTIC_DRIVER"]
        self.key = bytes.fromhex(os.environ["RINGLET_ELASTIC_KEY"])
        self.worker = os.environ["RINGLET_ELASTIC_WORKER"]
        # The driver answers a join within its elastic timeout (with a round
        # or an error); past that and a margin, it is not answering at all.
        self.answer_within = float(os.environ.get("RINGLET_ELASTIC_TIMEOUT_SECONDS", "600")) + 30
        self.lock = threading.Lock()
        self.connection = None

    def ask(self, message):
        with self.lock:
            if self.connection is None:
                self.connection = elastic_wire.connect(self.address, self.key, timeout=30)
                self.connection.sock.settimeout(self.answer_within)
            try:
                self.connection.send(dict(message, worker=self.worker))
                reply = self.connection.receive()
                if reply.get("secret") is not None:
                    reply["secret"] = self.connection.unseal(reply["secret"])
            except (OSError, elastic_wire.WireError) as e:
                self.connection.close()
                self.connection = None
                raise elastic_wire.WireError(
                    f"worker {self.worker} lost the elastic driver at {self.address}: {e}") from None
        if "error" in reply:
            raise RuntimeError(f"the elastic driver refused worker {self.worker}: "
                               f"{reply['error']}")
        return reply


_driver = None
_round = 0            # the round this worker last joined
_hosts_version = 0    # the driver's count of host changes when it joined


def _the_driver():
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


def join_next_round():
    """Blocks until the driver forms a round with this worker in it, then
    sets this process's environment to its place there. A worker the driver
    no longer wants (its host left the job) exits quietly."""
    global _round, _hosts_version
    driver = _the_driver()
    while True:
        reply = driver.ask({"op": "join", "after": _round})
        if reply.get("stop"):
            raise SystemExit(0)
        if reply.get("serve"):
            # Rank 0 of the round: its store listens here.
            rendezvous = job.rendezvous_address(reply["address"])
            reply = driver.ask({"op": "serve", "round": reply["round"],
                                "rendezvous": rendezvous})
        if reply.get("retry"):
            continue  # the round broke up before it began (a worker died)
        break
    placement = job.Placement(*(reply[k] for k in ("rank", "size", "local_rank", "local_size",
                                                   "cross_rank", "cross_size")))
    os.environ.update(job.rank_environment(placement, reply["rendezvous"], reply["secret"],
                                           reply["job_id"]))
    _round = reply["round"]
    _hosts_version = reply["hosts_version"]


def hosts_changed():
    """True when the driver's hosts changed since this worker's round began:
    'added' or 'removed' (both: 'added'), else None."""
    reply = _the_driver().ask({"op": "updates", "since": _hosts_version})
    return reply.get("change")
