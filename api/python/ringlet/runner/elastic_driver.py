"""The driver of an elastic job, what `ringletrun --min-np A --max-np B
--host-discovery-script S` runs: once the discovery script reports -np
slots, it starts a worker per slot (up to --max-np), forms the job's
rounds, and re-forms it when workers die or slots come and go, as Horovod's
elastic driver does.

- Discovery: the script (a shell command) runs every --discovery-interval
  seconds (default 1); each line of its output is ``host:slots`` (``host``
  alone is one slot). A script that fails keeps the hosts it last reported.
- Workers: one process per (host, slot), started by ``ringletrun
  --remote-agent``, on another host through the remote shell: the command,
  working directory and environment (the keys among it) go through the
  agent's stdin, never a command line, and a worker ends when that stream
  closes, so none outlives a driver that was killed. Each worker's lines are
  printed prefixed ``[host:slot]``.
- Rounds: each init() of a worker asks the driver for its place in the next
  round (ringlet.runner.elastic_worker). A round forms once every live worker
  asked: ranks keep the previous round's order (so rank 0 holds the state
  every new worker receives), hosts together, new workers last; a new secret
  and job id each time, and the round's rank 0 serves its store on a port it
  picks. No connection or shared-memory segment of a round outlives it.
- Failures: a worker that exits non-zero marks its host failed; a host that
  failed --blacklist-failures times (default 1, as Horovod) is dropped from
  the job (for good, or until its cooldown ends where
  --blacklist-cooldown-range is given: ringlet.runner.elastic_hosts), its
  other workers stopped, and a host still in it gets a new worker on the
  failed slot. The survivors' collectives fail, they roll back
  to their last commit and ask for the next round. Fewer live
  workers than --min-np for --elastic-timeout seconds end the job.
- Growth: a new slot (up to --max-np workers) gets a worker, and the others
  learn that the hosts changed at their next State.commit() (or
  check_host_updates()), re-form with it, and send it their state.

The job ends 0 when every worker ended 0, and otherwise with a line saying
which worker failed and why the job could not go on.

The driver serves other engines too: where the hosts come from (a
discovery function) and how a worker starts (a launcher) are its
arguments, so that Ray's actors (ringlet.ray.elastic) and Spark's tasks
(ringlet.spark.elastic) are workers of the same driver."""

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time

from ringlet.runner import elastic_rounds, elastic_wire, job
from ringlet.runner.elastic_hosts import HostBlacklist, check_cooldown_range


def log(message):
    print(f"ringletrun (elastic): {message}", file=sys.stderr, flush=True)


class Worker:
    def __init__(self, host, slot, process):
        self.host = host
        self.slot = slot
        self.process = process
        self.name = f"{host}:{slot}"
        self.last_rank = None     # its rank in the last round it was in
        self.joined_after = None  # the round it asked to follow, while it waits
        self.address = None       # where the driver saw it connect from
        self.stopping = False     # the driver ended it (its host left the job)
        self.exit_code = None


class Round:
    def __init__(self, number, members, secret, job_id):
        self.number = number
        self.members = members    # Worker -> job.Placement
        self.secret = secret
        self.job_id = job_id
        self.rendezvous = None    # host:port, once its rank 0 said


def parse_hosts(text):
    """The discovery script's output as an ordered {host: slots}."""
    hosts = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        host, _, slots = line.partition(":")
        try:
            count = int(slots) if slots else 1
        except ValueError:
            raise ValueError(f"the discovery script printed {line!r}, not host:slots") from None
        if count < 0:
            raise ValueError(f"the discovery script printed {line!r}: slots must not be negative")
        hosts[host.strip()] = hosts.get(host.strip(), 0) + count
    return hosts


def sizes_renamed(min_num_proc, max_num_proc, min_np, max_np):
    """(min_num_proc, max_num_proc), taking Horovod's deprecated names
    ``min_np``/``max_np`` (with its warning) where a caller gave them."""
    import warnings

    if min_np is not None:
        warnings.warn("min_np is deprecated, use min_num_proc instead", DeprecationWarning)
        min_num_proc = min_np
    if max_np is not None:
        warnings.warn("max_np is deprecated, use max_num_proc instead", DeprecationWarning)
        max_num_proc = max_np
    return min_num_proc, max_num_proc


def is_local(host):
    return host in ("localhost", "127.0.0.1", "::1", socket.gethostname())


class Settings:
    """An elastic job's limits, as ringletrun's flags (or an engine's
    arguments) give them."""

    def __init__(self, np, min_np=None, max_np=None, elastic_timeout=600.0, reset_limit=None,
                 blacklist_failures=1, cooldown_range=None, discovery_interval=1.0,
                 start_timeout=None):
        self.np = np
        self.min_np = min_np if min_np is not None else np
        self.max_np = max_np
        self.elastic_timeout = elastic_timeout
        self.reset_limit = reset_limit
        self.blacklist_failures = blacklist_failures
        self.cooldown_range = cooldown_range
        self.discovery_interval = discovery_interval
        # How long the first -np slots may take to show (else the elastic timeout).
        self.start_timeout = start_timeout if start_timeout is not None else elastic_timeout


class ScriptDiscovery:
    """The hosts a discovery script prints: {host: slots}, or None where it
    failed (the driver then keeps the hosts it had)."""

    def __init__(self, command, interval):
        self.command = command
        self.interval = interval

    def __call__(self):
        try:
            out = subprocess.run(self.command, shell=True, capture_output=True, text=True,
                                 timeout=max(5.0, self.interval * 10))
            if out.returncode != 0:
                raise RuntimeError(f"exit status {out.returncode}: {out.stderr.strip()[-300:]}")
            return parse_hosts(out.stdout)
        except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
            log(f"the host discovery script {self.command} failed ({e}); "
                f"keeping the hosts it reported last")
            return None


class AgentLauncher:
    """Starts each worker as a process, through ringletrun's agent (on
    another host, through the remote shell). A worker's handle is its
    subprocess.Popen; its lines are printed prefixed [host:slot]."""

    def __init__(self, command, ringletrun="ringletrun", rsh="ssh -o BatchMode=yes",
                 network_interface=""):
        self.command = command
        self.ringletrun = ringletrun
        self.rsh = rsh
        self.network_interface = network_interface
        self.forwarders = []

    def start(self, name, host, slot, elastic_env):
        # Through ringletrun's agent on this host too: a worker ends when the
        # agent's stdin closes, so none outlives a driver that was killed.
        env = job.without_job(os.environ)
        env.update(elastic_env)
        if self.network_interface:
            env.update(job.interface_environment({self.network_interface}, env))
        argv = [self.ringletrun, "--remote-agent"]
        if not is_local(host):
            argv = self.rsh.split() + [host] + argv
            for own in ("HOSTNAME", "RINGLET_HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_"):
                env.pop(own, None)
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        process.stdin.write(agent_block(os.getcwd(), self.command, env))
        process.stdin.flush()  # kept open: the agent ends the worker when it closes
        for stream, kind in ((process.stdout, "stdout"), (process.stderr, "stderr")):
            t = threading.Thread(target=forward, args=(stream, name, kind), daemon=True)
            t.start()
            self.forwarders.append(t)
        return process

    def listen_address(self, hosts):
        """Where the workers reach the driver: loopback for a job on this
        host, the chosen interface's address, else the address this host
        reaches the first other host from (never every address)."""
        remote = [h for h in hosts if not is_local(h)]
        if not remote:
            return "127.0.0.1"
        if self.network_interface:
            return job.interface_address(self.network_interface)
        for host in remote:
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                    probe.connect((host, 9))
                    return probe.getsockname()[0]
            except OSError:
                continue
        log(f"no host of {', '.join(remote)} resolves here: the driver listens on 127.0.0.1, "
            f"which only workers on this machine reach")
        return "127.0.0.1"

    def close(self):
        for t in self.forwarders:
            t.join(2)


class Driver:
    """Runs an elastic job: ``discover()`` returns the hosts ({host: slots},
    or None to keep the last); ``launcher.start(name, host, slot, env)``
    starts a worker with the elastic variables ``env`` and returns a handle
    that behaves as a subprocess.Popen (poll, returncode, terminate, kill,
    wait); ``launcher.listen_address(hosts)`` says where workers reach the
    driver."""

    def __init__(self, settings, discover, launcher, key=None):
        self.settings = settings
        self.discover = discover
        self.launcher = launcher
        self.key = key or secrets.token_bytes(32)  # the workers' messages carry its HMAC
        self.lock = threading.Condition()
        self.workers = []           # every worker started, alive or not
        self.hosts = {}             # the last discovery
        self.blacklist = HostBlacklist(settings.blacklist_failures, settings.cooldown_range)
        self.hosts_version = 0      # counts the host changes the workers are told of
        self.change = None          # 'added' / 'removed' since the last round formed
        self.round = Round(0, {}, None, None)
        self.resets = 0
        self.ended = None           # the reason the job ended, once it did
        self.outcome = None         # why the job failed, where it did
        self.short_since = None     # when live workers fell below --min-np
        self.server = None

    # -- discovery and workers --

    def live(self):
        return [w for w in self.workers if w.exit_code is None and not w.stopping]

    def free_slots(self):
        taken = {(w.host, w.slot) for w in self.workers if w.exit_code is None}
        return [(h, s) for h, n in self.hosts.items() if h not in self.blacklist
                for s in range(n) if (h, s) not in taken]

    def grow(self, limit):
        """Starts workers on free slots, at most `limit` of them in all; True if any started."""
        started = False
        for host, slot in self.free_slots():
            if len(self.live()) >= limit:
                break
            self.workers.append(self.start_worker(host, slot))
            started = True
        return started

    def elastic_env(self, name):
        return {"RINGLET_ELASTIC_DRIVER": self.driver_address,
                "RINGLET_ELASTIC_KEY": self.key.hex(),
                "RINGLET_ELASTIC_WORKER": name,
                "RINGLET_ELASTIC_TIMEOUT_SECONDS": str(self.settings.elastic_timeout),
                "HOROVOD_ELASTIC": "1"}

    def start_worker(self, host, slot):
        name = f"{host}:{slot}"
        worker = Worker(host, slot, self.launcher.start(name, host, slot, self.elastic_env(name)))
        log(f"started worker {worker.name}")
        return worker

    def reap(self):
        """Records the workers that ended; returns how many failed."""
        failed = 0
        for w in self.workers:
            if w.exit_code is not None or w.process.poll() is None:
                continue
            w.exit_code = w.process.returncode
            if w.stopping or w.exit_code == 0:
                continue
            failed += 1
            self.abandon_unserved_round(w)
            how = getattr(w.process, "how_it_ended", None) or (
                f"killed by {signal.Signals(-w.exit_code).name}" if w.exit_code < 0
                else f"exit status {w.exit_code}")
            self.outcome = f"worker {w.name} (rank {w.last_rank}) failed: {how}"
            log(f"worker {w.name} (rank {w.last_rank} of round {self.round.number}) failed: "
                f"{how}")
            if self.blacklist.record_failure(w.host):
                left = self.blacklist.seconds_left(w.host)
                log(f"host {w.host} failed {self.blacklist.failures[w.host]} time(s): dropped "
                    f"from the job" + (f" for {left:.1f} s" if left != float("inf") else ""))
                for other in self.live():
                    if other.host == w.host:
                        self.stop(other)
        return failed

    def abandon_unserved_round(self, dead):
        """A member of a round whose store is not up yet died: the others,
        still waiting for its address, wait for the next round instead."""
        rnd = self.round
        if dead not in rnd.members or rnd.rendezvous is not None:
            return
        for w in rnd.members:
            if w is not dead and w.exit_code is None:
                w.joined_after = rnd.number - 1
        rnd.members = {}
        self.lock.notify_all()

    def stop(self, worker):
        worker.stopping = True
        try:
            worker.process.terminate()
        except OSError:
            pass

    # -- rounds --

    def try_form_round(self):
        """Forms the next round once every live worker asked for it."""
        live = self.live()
        if not live or any(w.joined_after is None for w in live):
            return
        if len(live) < self.settings.min_np:
            return
        if self.round.number > 0:
            self.resets += 1
            if self.settings.reset_limit is not None and self.resets > self.settings.reset_limit:
                self.end(f"the job re-formed {self.resets} times, past --reset-limit "
                         f"{self.settings.reset_limit}")
                return
        # Hosts in the last round's order, each host's workers by slot, so
        # that a local rank stays its slot's; rank 0 a survivor, which holds
        # the committed state (elastic_rounds says how).
        ordered = elastic_rounds.round_order(live)
        placements = job.place_workers([w.host for w in ordered])
        members = dict(zip(ordered, placements))
        for w, p in members.items():
            if p.local_rank != w.slot:
                slots = {o.slot for o in ordered if o.host == w.host}
                why = ("a lower slot of its host has no worker in this round"
                       if any(s not in slots for s in range(w.slot)) else
                       "a survivor goes first on its host, to hold the state as rank 0")
                log(f"worker {w.name} has local rank {p.local_rank} in round "
                    f"{self.round.number + 1}, not its slot's {w.slot}: {why}")
        self.round = Round(self.round.number + 1, members, job.new_secret(), job.new_job_id())
        for w, p in members.items():
            w.last_rank = p.rank
            w.joined_after = None
        self.change = None
        self.short_since = None
        log(f"round {self.round.number}: {len(members)} workers, ranks "
            + ", ".join(f"{w.name}={p.rank}" for w, p in members.items()))
        self.lock.notify_all()

    def placement_reply(self, worker, rnd):
        p = rnd.members[worker]
        return {"round": rnd.number, "rank": p.rank, "size": p.size, "local_rank": p.local_rank,
                "local_size": p.local_size, "cross_rank": p.cross_rank,
                "cross_size": p.cross_size, "secret": rnd.secret, "job_id": rnd.job_id,
                "rendezvous": rnd.rendezvous, "hosts_version": self.hosts_version}

    def on_join(self, worker, after, deadline):
        worker.joined_after = after
        self.try_form_round()
        while True:
            if self.ended is not None:
                return {"error": f"the job ended: {self.ended}"}
            if worker.stopping or worker.host in self.blacklist:
                return {"stop": True}
            rnd = self.round
            if rnd.number > after and worker in rnd.members:
                if rnd.members[worker].rank == 0 and rnd.rendezvous is None:
                    return {"serve": True, "round": rnd.number, "address": worker.address}
                if rnd.rendezvous is not None:
                    return self.placement_reply(worker, rnd)
            if time.monotonic() > deadline:
                return {"error": f"no round formed within --elastic-timeout "
                                 f"{self.settings.elastic_timeout} s"}
            self.lock.wait(0.5)

    def on_serve(self, worker, number, rendezvous):
        if self.round.number != number:
            return {"retry": True}
        self.round.rendezvous = rendezvous
        self.lock.notify_all()
        return self.placement_reply(worker, self.round)

    def handle(self, sock, peer):
        worker = None
        connection = None
        try:
            connection = elastic_wire.accept(sock, self.key)
            while True:
                message = connection.receive()
                with self.lock:
                    name = message.get("worker")
                    worker = next((w for w in self.workers if w.name == name and
                                   w.exit_code is None), None)
                    if worker is None:
                        reply = {"error": f"no live worker is named {name!r}"}
                    elif message.get("op") == "join":
                        worker.address = peer
                        reply = self.on_join(worker, int(message.get("after", 0)),
                                             time.monotonic() + self.settings.elastic_timeout)
                    elif message.get("op") == "serve":
                        reply = self.on_serve(worker, message.get("round"),
                                              message.get("rendezvous"))
                    elif message.get("op") == "updates":
                        changed = self.hosts_version > int(message.get("since", 0))
                        reply = {"change": self.change if changed else None}
                    else:
                        reply = {"error": f"unknown request {message.get('op')!r}"}
                if reply.get("secret") is not None:
                    reply["secret"] = connection.seal(reply["secret"])
                connection.send(reply)
        except (OSError, elastic_wire.ConnectionClosed):
            pass
        except (elastic_wire.WireError, ValueError) as e:
            # Not one of the job's workers, or one that broke the protocol.
            log(f"refused the connection from {peer}"
                + (f" (worker {worker.name})" if worker is not None else "") + f": {e}")
        finally:
            if connection is not None:
                connection.close()
            else:
                sock.close()

    def serve(self, address):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address, 0))
        listener.listen(64)
        self.server = listener
        self.driver_address = f"{address}:{listener.getsockname()[1]}"

        def accept():
            while True:
                try:
                    sock, peer = listener.accept()
                except OSError:
                    return
                threading.Thread(target=self.handle, args=(sock, peer[0]), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()

    # -- the job --

    def end(self, reason):
        if self.ended is None:
            self.ended = reason
            self.lock.notify_all()

    def run(self):
        """Runs the job to its end; returns 0 where it finished, else 1 (and
        ``outcome`` says why)."""
        settings = self.settings
        deadline = time.monotonic() + settings.start_timeout
        while True:
            found = self.discover()
            if found is not None:
                self.hosts = found
            usable = sum(n for h, n in self.hosts.items() if h not in self.blacklist)
            if usable >= settings.np:
                break
            if time.monotonic() > deadline or self.ended is not None:
                self.outcome = self.ended or (
                    f"host discovery reported {usable} usable slots, fewer than "
                    f"-np {settings.np}, for {settings.start_timeout:g} s")
                log(self.outcome)
                return 1
            time.sleep(settings.discovery_interval)
        self.serve(self.launcher.listen_address(self.hosts))
        with self.lock:
            # Once -np slots are there, every slot up to --max-np gets a
            # worker, as Horovod assigns them.
            self.grow(settings.max_np or sys.maxsize)
        next_discovery = time.monotonic() + settings.discovery_interval
        try:
            while True:
                with self.lock:
                    failed = self.reap()
                    if failed:
                        # Failed workers' slots, on hosts still in the job, get
                        # new workers: the job keeps its size where it can.
                        self.grow(len(self.live()) + failed)
                    self.readmit_cooled()
                    if time.monotonic() >= next_discovery:
                        next_discovery = time.monotonic() + settings.discovery_interval
                        self.rediscover()
                    self.try_form_round()
                    done = self.check_end()
                    if done is not None:
                        return done
                    self.lock.wait(0.1)
        finally:
            self.finish()

    def hosts_changed(self, change):
        self.hosts_version += 1
        self.change = "added" if change == "added" or self.change == "added" else "removed"

    def rediscover(self):
        found = self.discover()
        if found is None or found == self.hosts:
            return
        gone = [h for h in self.hosts if found.get(h, 0) == 0]
        self.hosts = found
        removed = False
        for w in self.live():
            if w.slot >= found.get(w.host, 0):
                log(f"host {w.host} no longer lists slot {w.slot}: stopping worker {w.name}")
                self.stop(w)
                removed = True
        added = self.grow(self.settings.max_np or sys.maxsize)
        if added or removed or gone:
            self.hosts_changed("added" if added else "removed")

    def readmit_cooled(self):
        back = self.blacklist.readmit_cooled()
        if not back:
            return
        log(f"host {', '.join(back)} ended its cooldown: back in the job")
        if self.grow(self.settings.max_np or sys.maxsize):
            self.hosts_changed("added")

    def check_end(self):
        if self.ended is not None:
            self.outcome = self.ended
            log(f"the job ends: {self.ended}")
            return 1
        finished = [w for w in self.workers if w.exit_code == 0 and not w.stopping]
        if all(w.exit_code is not None for w in self.workers):
            if finished:
                return 0
            self.outcome = "every worker has ended and none finished the job; the last " \
                           f"failure: {self.outcome}"
            log(self.outcome)
            return 1
        if finished:
            # The others are finishing too; those waiting for a round (a
            # worker that joined as the job ended) will not get one.
            for w in self.live():
                if w.joined_after is not None:
                    log(f"worker {w.name} joined as the job finished: stopping it")
                    self.stop(w)
            return None
        if len(self.live()) < self.settings.min_np and not self.free_slots():
            self.short_since = self.short_since or time.monotonic()
            if time.monotonic() - self.short_since > self.settings.elastic_timeout:
                self.end(f"{len(self.live())} live workers, fewer than --min-np "
                         f"{self.settings.min_np}, for --elastic-timeout "
                         f"{self.settings.elastic_timeout} s"
                         + (f" (the last failure: {self.outcome})" if self.outcome else ""))
        return None

    def finished_workers(self):
        """The workers that finished the job, by their rank in its last round."""
        done = [w for w in self.workers if w.exit_code == 0 and not w.stopping]
        return sorted(done, key=lambda w: w.last_rank if w.last_rank is not None else 0)

    def finish(self):
        for w in self.workers:
            if w.exit_code is None and w.process.poll() is None:
                self.stop(w)
        stop_by = time.monotonic() + 5
        for w in self.workers:
            try:
                w.process.wait(max(0.1, stop_by - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.process.kill()
                try:
                    w.process.wait(5)
                except subprocess.TimeoutExpired:
                    log(f"worker {w.name} did not end within 5 s of being killed")
        self.launcher.close()
        if self.server is not None:
            self.server.close()


def forward(stream, worker, name):
    out = sys.stdout if name == "stdout" else sys.stderr
    for line in iter(stream.readline, b""):
        out.write(f"[{worker}]<{name}>:{line.decode(errors='replace')}")
        out.flush()


def agent_block(cwd, argv, env):
    """The launch block ringletrun's --remote-agent reads (agent_wire.h)."""
    fields = ["RINGLET-AGENT/1", cwd, str(len(argv))] + list(argv)
    fields += [str(len(env))] + [f"{k}={v}" for k, v in env.items()]
    return b"".join(f.encode() + b"\0" for f in fields)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="ringletrun (elastic)")
    p.add_argument("--np", type=int, required=True)
    p.add_argument("--min-np", type=int, default=None)
    p.add_argument("--max-np", type=int, default=None)
    p.add_argument("--host-discovery-script", required=True)
    p.add_argument("--discovery-interval", type=float, default=1.0)
    p.add_argument("--elastic-timeout", type=float,
                   default=float(os.environ.get("HOROVOD_ELASTIC_TIMEOUT", "600")))
    p.add_argument("--reset-limit", type=int, default=None)
    p.add_argument("--blacklist-failures", type=int, default=1)
    p.add_argument("--blacklist-cooldown-range", type=float, nargs=2, default=None,
                   metavar=("LOWER", "UPPER"))
    p.add_argument("--rsh", default="ssh -o BatchMode=yes")
    p.add_argument("--ringletrun", default="ringletrun")
    p.add_argument("--network-interface", default="")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        p.error("no command to run")
    args.min_np = args.min_np if args.min_np is not None else args.np
    for name in ("np", "min_np", "max_np", "blacklist_failures"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, not {value}")
    if args.max_np is not None and not args.min_np <= args.np <= args.max_np:
        p.error(f"need --min-np {args.min_np} <= -np {args.np} <= --max-np {args.max_np}")
    if args.min_np > args.np:
        p.error(f"--min-np {args.min_np} is more than -np {args.np}")
    try:
        check_cooldown_range(args.blacklist_cooldown_range)
    except ValueError as e:
        p.error(f"--blacklist-cooldown-range: {e}")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    settings = Settings(args.np, args.min_np, args.max_np, args.elastic_timeout,
                        args.reset_limit, args.blacklist_failures,
                        args.blacklist_cooldown_range, args.discovery_interval)
    launcher = AgentLauncher(args.command, args.ringletrun, args.rsh, args.network_interface)
    driver = Driver(settings, ScriptDiscovery(args.host_discovery_script,
                                              args.discovery_interval), launcher)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: sys.exit(128 + s))
    return driver.run()


if __name__ == "__main__":
    sys.exit(main())
