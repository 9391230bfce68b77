"""Several hosts on one machine, for multi-host tests: each host is a Linux
network namespace.

    with Hosts(2) as hosts:
        hosts.names          # ["rl1a2b3ch0", "rl1a2b3ch1"]: also their host names
        hosts.address(1)     # "10.217.40.2"
        hosts.run_in(0, ["getent", "hosts", hosts.names[1]])
    assert hosts.left_running == {}   # nothing was still running at the end

What `Hosts(n)` makes, all named after one random id so that instances
running at once never collide:
- n namespaces, each with its loopback up and an `eth0` (or the `interface`
  named) holding one address
  of a /24 in 10.0.0.0/8 that no other live instance (and no address of this
  machine) uses;
- one Linux bridge in the root namespace, with no address of its own: the
  hosts reach each other through it and nothing else (no route leaves it);
- a veth pair per host, `eth0` inside, the other end on the bridge;
- `/etc/netns/<name>/hosts`, which `ip netns exec` mounts over `/etc/hosts`
  inside the namespace, so that every host resolves every host's name (and
  localhost);
- optionally `tc` shaping on each host's interface (its egress, so every
  direction between two hosts is shaped once): `rate="10gbit"` alone is a
  token bucket (tbf); `delay="50us"`, with or without a rate, needs netem.

Commands run "on" host i through `netns_rsh.sh`, the remote shell that
ringletrun is given in the tests: in the namespace, with the host's name as
the UTS host name.

Teardown (leaving the `with` block, an exception and KeyboardInterrupt
included, or `close()`) stops whatever still runs in the namespaces (SIGKILL),
deletes the namespaces, veths, bridge and `/etc/netns/<name>` folders, and
records in `left_running` which processes it found still running (a second
after the block ended), per namespace. Every instance leaves a record under
`/run/ringlet-hosts` while it lives; an instance whose owner died without its
teardown (killed by a test runner's timeout) is swept by the next one.

Making namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), `ip`
(iproute2), `unshare` and `hostname`; `why_unavailable()` says what is
missing here, for tests to skip with that reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

RSH = str(Path(__file__).resolve().parent / "netns_rsh.sh")
STATE_DIR = Path("/run/ringlet-hosts")
NETNS_ETC = Path("/etc/netns")

# How long a process may outlive the job that started it before teardown
# counts it as left running (the launcher reaps its ranks, but their last
# exit may finish a moment after it returned).
SETTLE_SECONDS = 1.0


class HostsUnavailable(RuntimeError):
    """Namespaced hosts cannot be made on this machine; the message says why."""


class TeardownError(RuntimeError):
    """Teardown could not remove everything; the message names what is left."""


def _command(argv: list[str], timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _must(argv: list[str], timeout: float = 20) -> str:
    r = _command(argv, timeout)
    if r.returncode != 0:
        raise HostsUnavailable(f"`{' '.join(argv)}` failed ({r.returncode}): "
                               f"{(r.stderr or r.stdout).strip()}")
    return r.stdout


_unavailable: list[str | None] = []


def why_unavailable() -> str | None:
    """None when namespaced hosts can be made here, else the reason (for
    pytest.skip). Found once per process, by making one host and asking it
    its name."""
    if not _unavailable:
        _unavailable.append(find_why_unavailable())
    return _unavailable[0]


def find_why_unavailable() -> str | None:
    """why_unavailable(), found afresh."""
    missing = [tool for tool in ("ip", "unshare", "hostname") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        return ("namespaced hosts need root (CAP_NET_ADMIN and CAP_SYS_ADMIN for "
                f"`ip netns add` and `unshare --uts`); running as uid {os.geteuid()}")
    if missing:
        return f"namespaced hosts need {', '.join(missing)}, not found on PATH"
    try:
        with Hosts(1) as probe:
            r = probe.run_in(0, ["hostname"], timeout=20)
            if r.returncode != 0 or r.stdout.strip() != probe.names[0]:
                return (f"`{RSH} {probe.names[0]} hostname` gave {r.returncode}: "
                        f"{(r.stdout + r.stderr).strip()!r} (unshare --uts failed?)")
    except (HostsUnavailable, TeardownError, OSError, subprocess.SubprocessError) as e:
        return f"namespaced hosts cannot be made here: {e}"
    return None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat),
    which tells a live owner from a later process given the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_text(pid: int) -> str:
    """A process as teardown reports it: its pid and command line ("123 sleep 300")."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} " + " ".join(a.decode(errors="replace") for a in argv if a)


@contextlib.contextmanager
def _state_lock():
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(STATE_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _netns_pids(name: str) -> list[int]:
    r = _command(["ip", "netns", "pids", name])
    return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []


def _netns_inode(name: str) -> int | None:
    """The namespace's inode (as /proc/PID/ns/net names it: net:[INODE])."""
    try:
        return os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return None


def _pids_in(inode: int) -> list[int]:
    """The live processes in the network namespace `inode`, whether or not it
    still has a name (a process that opened it before `ip netns del` can
    still enter it)."""
    wanted = f"net:[{inode}]"
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.readlink(f"/proc/{entry.name}/ns/net") == wanted:
                    pids.append(int(entry.name))
            except OSError:
                pass  # gone, or a zombie
    return pids


class Hosts:
    """n hosts, each a network namespace on one bridge; see the module's text."""

    def __init__(self, n: int, rate: str | None = None, delay: str | None = None,
                 interface: str = "eth0"):
        if n < 1:
            raise ValueError(f"Hosts(n): n must be at least 1, got {n}")
        self.n = n
        self.interface = interface
        self.rate = rate
        self.delay = delay
        self.id = ""
        self.names: list[str] = []
        self.bridge = ""
        self.left_running: dict[str, list[str]] | None = None
        self._subnet: ipaddress.IPv4Network | None = None
        self._made: dict[str, list[str]] = {"netns": [], "links": [], "etc": []}
        self._open = False

    # -- life cycle ---------------------------------------------------------

    def __enter__(self) -> Hosts:
        self.open()
        return self

    def __exit__(self, kind, error, trace) -> bool:
        try:
            self.close()
        except TeardownError as e:
            if error is None:
                raise
            if hasattr(error, "add_note"):
                error.add_note(f"and then: {e}")
        return False

    def open(self) -> None:
        """Makes the hosts; on failure removes what it made and raises
        HostsUnavailable naming the command that failed."""
        _sweep_stale()
        with _state_lock():
            self.id = self._fresh_id()
            self._subnet = self._fresh_subnet()
            self.names = [f"rl{self.id}h{i}" for i in range(self.n)]
            self.bridge = f"rl{self.id}br"
            # The record comes first: an owner killed halfway is swept too.
            self._record().write_text(json.dumps({
                "pid": os.getpid(), "start": _start_time(os.getpid()),
                "subnet": str(self._subnet), "netns": self.names,
                "links": [self.bridge] + [self._veth(i) for i in range(self.n)],
                "etc": [str(NETNS_ETC / name) for name in self.names]}))
        self._open = True
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def close(self) -> dict[str, list[str]]:
        """Tears everything down (again is a no-op) and returns (and keeps in
        `left_running`) the processes found still running per namespace.
        Raises TeardownError when something could not be removed."""
        if not self._open:
            return self.left_running or {}
        # A second Ctrl-C must not leave half the hosts behind.
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
        try:
            self.left_running, problems = _tear_down(
                self._made["netns"], self._made["links"], self._made["etc"], settle=SETTLE_SECONDS)
            self._record().unlink(missing_ok=True)
            self._open = False
        finally:
            if in_main:
                signal.signal(signal.SIGINT, previous)
        if problems:
            raise TeardownError("; ".join(problems))
        return self.left_running

    # -- what tests use -----------------------------------------------------

    def address(self, i: int) -> str:
        """Host i's IPv4 address (on its `interface`, eth0 unless named)."""
        self._check(i)
        return str(self._subnet.network_address + i + 1)

    @property
    def subnet(self) -> str:
        return str(self._subnet)

    def run_in(self, i: int, argv: list[str], timeout: float = 30,
               **kwargs) -> subprocess.CompletedProcess:
        """Runs argv on host i (through netns_rsh.sh) and returns its result,
        output captured as text."""
        self._check(i)
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run([RSH, self.names[i], *argv], timeout=timeout, **kwargs)

    def popen_in(self, i: int, argv: list[str], **kwargs) -> subprocess.Popen:
        """Starts argv on host i (through netns_rsh.sh) without waiting."""
        self._check(i)
        return subprocess.Popen([RSH, self.names[i], *argv], **kwargs)

    def pids(self, i: int) -> list[int]:
        """The processes running in host i's namespace (`ip netns pids`)."""
        self._check(i)
        return _netns_pids(self.names[i])

    def cut_link(self, i: int) -> None:
        """Unplugs host i: its bridge port goes down, so its interface loses the
        carrier and whatever it sends or is sent is dropped without a word
        (no reset, no unreachable), as with a pulled cable."""
        self._check(i)
        _must(["ip", "link", "set", self._veth(i), "down"])

    def restore_link(self, i: int) -> None:
        self._check(i)
        _must(["ip", "link", "set", self._veth(i), "up"])
        self._wait_carrier(i)

    # -- making -------------------------------------------------------------

    def _veth(self, i: int) -> str:
        return f"rl{self.id}v{i}"

    def _record(self) -> Path:
        return STATE_DIR / f"{self.id}.json"

    def _check(self, i: int) -> None:
        if not self._open:
            raise RuntimeError("Hosts: not open (use it inside its `with` block)")
        if not 0 <= i < self.n:
            raise IndexError(f"Hosts: host {i} of {self.n}")

    def _fresh_id(self) -> str:
        taken = set(_command(["ip", "netns", "list"]).stdout.split())
        while True:
            candidate = secrets.token_hex(3)
            if not any(name.startswith(f"rl{candidate}") for name in taken) and \
                    not (STATE_DIR / f"{candidate}.json").exists():
                return candidate

    def _fresh_subnet(self) -> ipaddress.IPv4Network:
        """A /24 that no live instance holds and that overlaps none of this
        machine's own addresses. Called under the state lock."""
        used = set()
        for record in STATE_DIR.glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                used.add(ipaddress.ip_network(json.loads(record.read_text())["subnet"]))
        for match in re.finditer(r"inet (\S+)", _command(["ip", "-4", "-o", "addr"]).stdout):
            used.add(ipaddress.ip_interface(match.group(1)).network)
        rng = random.Random(secrets.randbits(32))
        for _ in range(1000):
            net = ipaddress.ip_network(f"10.{rng.randrange(100, 250)}.{rng.randrange(1, 255)}.0/24")
            if not any(net.overlaps(u) for u in used):
                return net
        raise HostsUnavailable("no free /24 left in 10.100.0.0-10.249.255.0")

    def _make(self) -> None:
        ip = lambda *args: _must(["ip", *args])  # noqa: E731
        ip("link", "add", self.bridge, "type", "bridge")
        self._made["links"].append(self.bridge)
        ip("link", "set", self.bridge, "up")
        hosts_file = "".join(
            ["127.0.0.1\tlocalhost\n", "::1\tlocalhost ip6-localhost ip6-loopback\n"] +
            [f"{self.address(i)}\t{name}\n" for i, name in enumerate(self.names)])
        for i, name in enumerate(self.names):
            ip("netns", "add", name)
            self._made["netns"].append(name)
            etc = NETNS_ETC / name
            etc.mkdir(parents=True, exist_ok=True)
            self._made["etc"].append(str(etc))
            (etc / "hosts").write_text(hosts_file)
            ip("link", "add", self._veth(i), "type", "veth",
               "peer", "name", self.interface, "netns", name)
            self._made["links"].append(self._veth(i))
            ip("link", "set", self._veth(i), "master", self.bridge)
            ip("link", "set", self._veth(i), "up")
            ip("-n", name, "link", "set", "lo", "up")
            ip("-n", name, "addr", "add", f"{self.address(i)}/24", "dev", self.interface)
            ip("-n", name, "link", "set", self.interface, "up")
            self._shape(name)
        for i in range(self.n):
            self._wait_carrier(i)

    def _shape(self, name: str) -> None:
        if self.delay is not None:
            qdisc = ["netem", "delay", self.delay] + (["rate", self.rate] if self.rate else [])
        elif self.rate is not None:
            # A 256 KiB bucket holds a whole GSO segment (64 KiB) at any
            # rate; the latency bounds the queue behind it.
            qdisc = ["tbf", "rate", self.rate, "burst", "256kb", "latency", "50ms"]
        else:
            return
        if shutil.which("tc") is None:
            raise HostsUnavailable(
                "shaping the hosts' links needs tc (iproute2), not found on PATH")
        tc = ["tc", "qdisc", "add", "dev", self.interface, "root", *qdisc]
        r = _command(["ip", "netns", "exec", name, *tc])
        if r.returncode != 0:
            raise HostsUnavailable(f"`{' '.join(tc)}` failed in {name}: "
                                   f"{r.stderr.strip()} (the {qdisc[0]} qdisc is needed for "
                                   f"{'delay' if qdisc[0] == 'netem' else 'rate'} shaping)")

    def _wait_carrier(self, i: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            state = _command(["ip", "-n", self.names[i], "-o", "link", "show",
                              self.interface]).stdout
            if "LOWER_UP" in state:
                return
            if time.monotonic() > deadline:
                raise HostsUnavailable(f"{self.names[i]}: {self.interface} has no carrier "
                                       f"after {timeout} s: {state}")
            time.sleep(0.02)


def _tear_down(netns: list[str], links: list[str], etc: list[str],
               settle: float) -> tuple[dict[str, list[str]], list[str]]:
    """Stops and removes what one instance made; returns what was left
    running (per namespace) and what could not be removed."""
    problems: list[str] = []
    found: dict[str, dict[int, str]] = {}
    inodes = {name: ino for name in netns if (ino := _netns_inode(name)) is not None}

    def stop_all() -> None:
        for name, inode in inodes.items():
            stop_by = time.monotonic() + 10
            while pids := _pids_in(inode):
                for pid in pids:
                    found.setdefault(name, {}).setdefault(pid, process_text(pid))
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                if time.monotonic() > stop_by:
                    problems.append(f"{name}: still running after SIGKILL: {pids}")
                    break
                time.sleep(0.02)

    # What is exiting on its own gets the settling time, counted once.
    deadline = time.monotonic() + settle
    while any(_pids_in(i) for i in inodes.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop_all()
    for link in links:
        r = _command(["ip", "link", "del", link])
        if r.returncode != 0 and "Cannot find device" not in r.stderr:
            problems.append(f"ip link del {link}: {r.stderr.strip()}")
    for name in netns:
        r = _command(["ip", "netns", "del", name])
        if r.returncode != 0 and "No such file" not in r.stderr:
            problems.append(f"ip netns del {name}: {r.stderr.strip()}")
    # Whatever entered between the first sweep and the deletion.
    stop_all()
    for folder in etc:
        try:
            shutil.rmtree(folder)
        except FileNotFoundError:
            pass
        except OSError as e:
            problems.append(f"rm -r {folder}: {e}")
    left = {name: [text for _, text in sorted(pids.items())] for name, pids in found.items()}
    return left, problems


def _sweep_stale() -> None:
    """Removes the hosts of instances whose owner process is gone."""
    if not STATE_DIR.is_dir():
        return
    with _state_lock():
        for record in STATE_DIR.glob("*.json"):
            try:
                state = json.loads(record.read_text())
                pid, start = int(state["pid"]), state["start"]
            except (OSError, ValueError, KeyError):
                continue
            if _start_time(pid) is not None and _start_time(pid) == start:
                continue  # its owner still runs
            _tear_down(state.get("netns", []), state.get("links", []), state.get("etc", []),
                       settle=0)
            record.unlink(missing_ok=True)
