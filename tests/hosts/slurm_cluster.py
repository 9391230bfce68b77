"""A one-node Slurm cluster of Debian's slurm-wlm, made and removed by a test:

    with SlurmCluster(cpus=8) as cluster:
        cluster.run(["salloc", "-n", "3", RINGLETRUN, "-np", "3", ...])

What it starts, all under one temporary folder: a munge daemon with a key of
its own (its socket there, so that the machine's munge, if any, is never
used), slurmctld and slurmd with a slurm.conf naming this machine as the one
node and its partition. The ports are free ones found at the start. The node
claims `cpus` CPUs whatever the machine has (SlurmdParameters=config_overrides),
so that a test may start more tasks than there are cores, as the other
multi-rank tests do.

Teardown stops the daemons (`scontrol shutdown`, then SIGTERM and SIGKILL for
what is left), and records in `left_running` every process of the cluster or
of its jobs that outlived it (slurmstepd, the tasks): a test asserts it empty.

Needs root (slurmd starts tasks as their user, and munged runs as root here
with --force), and munged, slurmctld, slurmd, scontrol, sinfo, salloc and srun
on PATH; `why_unavailable()` says what is missing, for tests to skip with it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PROGRAMS = ("munged", "slurmctld", "slurmd", "scontrol", "sinfo", "salloc", "srun")
START_SECONDS = 30
STOP_SECONDS = 10


class SlurmUnavailable(RuntimeError):
    """The cluster could not be started; the message says why."""


def why_unavailable() -> str | None:
    """None when a cluster can be made here, else the reason."""
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        return (f"a Slurm cluster needs {', '.join(missing)}, not found on PATH (Debian: "
                "apt-get install slurmd slurmctld slurm-client munge)")
    if os.geteuid() != 0:
        return f"a one-node Slurm cluster is started as root here; running as uid {os.geteuid()}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = Path(f"/proc/{pid}/stat")
    try:
        return state.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class SlurmCluster:
    def __init__(self, cpus: int = 8):
        self.cpus = cpus
        self.node = socket.gethostname().split(".")[0]
        self.left_running: dict[int, str] = {}
        self._folder = None
        self._steps_before: set[int] = set()
        self._daemons: list[subprocess.Popen] = []
        self.env: dict[str, str] = {}

    def __enter__(self) -> "SlurmCluster":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, argv: list[str], timeout: float = 120, env: dict[str, str] | None = None,
            **kwargs) -> subprocess.CompletedProcess:
        """argv with this cluster's SLURM_CONF, stdout and stderr captured."""
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env={**os.environ, **self.env, **(env or {})},
                              **kwargs)

    def _start(self) -> None:
        # A machine's own Slurm steps are not this cluster's to report or stop.
        self._steps_before = set(self._cluster_processes())
        self._folder = tempfile.TemporaryDirectory(prefix="ringlet-slurm-")
        root = Path(self._folder.name)
        for sub in ("munge", "state", "spool", "log"):
            (root / sub).mkdir(mode=0o700)
        key = root / "munge" / "key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o600)
        self._socket = root / "munge" / "socket"
        self._daemon(["munged", "--foreground", "--force", f"--key-file={key}",
                      f"--socket={self._socket}", f"--pid-file={root}/munge/pid",
                      f"--log-file={root}/munge/log", f"--seed-file={root}/munge/seed"],
                     root / "log" / "munged.out")
        self._wait_for(lambda: self._socket.exists(), "munged's socket")

        conf = root / "slurm.conf"
        conf.write_text("\n".join([
            "ClusterName=ringlet",
            # Addresses given, so that nothing depends on resolving the name.
            f"SlurmctldHost={self.node}(127.0.0.1)",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self._socket}",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log",
            f"SlurmdLogFile={root}/log/slurmd.log",
            # No cgroups: tasks are tracked by their process tree.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]))
        self.env = {"SLURM_CONF": str(conf)}
        self._daemon(["slurmctld", "-D", "-i", "-f", str(conf)], root / "log" / "slurmctld.out")
        self._daemon(["slurmd", "-D", "-f", str(conf), "-N", self.node], root / "log" / "slurmd.out")

        def idle() -> bool:
            r = self.run(["sinfo", "-h", "-N", "-o", "%t"], timeout=10)
            return r.returncode == 0 and r.stdout.strip() == "idle"
        self._wait_for(idle, f"node {self.node} idle in sinfo")

    def _daemon(self, argv: list[str], out: Path) -> None:
        with open(out, "w") as sink:
            self._daemons.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink,
                                                  stderr=subprocess.STDOUT,
                                                  env=dict(os.environ, **self.env)))

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            for d in self._daemons:
                if d.poll() is not None:
                    raise SlurmUnavailable(f"{d.args[0]} exited with {d.returncode} while "
                                           f"waiting for {what}: {self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise SlurmUnavailable(f"no {what} after {START_SECONDS} s: {self.logs()}")

    def logs(self) -> str:
        """The daemons' logs, for a failure's message."""
        if self._folder is None:
            return ""
        texts = []
        for f in sorted(Path(self._folder.name, "log").glob("*")):
            texts.append(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}")
        return "\n".join(texts)

    def _cluster_processes(self) -> dict[int, str]:
        """Processes of this cluster or its jobs: whatever names its folder
        (the daemons, their configuration) or runs as a step (slurmstepd) that
        was not running before the cluster started."""
        found = {}
        folder = self._folder.name if self._folder else None
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            if not _pid_alive(int(entry.name)):
                continue
            step = cmdline.startswith("slurmstepd") and int(entry.name) not in self._steps_before
            if (folder and folder in cmdline) or step:
                found[int(entry.name)] = cmdline
        return found

    def close(self) -> None:
        if self.env:
            try:
                self.run(["scontrol", "shutdown"], timeout=STOP_SECONDS)
            except subprocess.SubprocessError:
                pass
        deadline = time.monotonic() + STOP_SECONDS
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for d in self._daemons:
                if d.poll() is None:
                    d.send_signal(sig)
            for d in self._daemons:
                try:
                    d.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        time.sleep(0.5)
        self.left_running = self._cluster_processes()
        for pid in self.left_running:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None
        self.env = {}
