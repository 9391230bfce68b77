"""ringletrun jobs across hosts: `-H` and `--hostfile` over namespaced hosts
(netns.py) that ringletrun reaches through netns_rsh.sh, as it would reach
other machines through ssh. Each test makes its own hosts and ends by
checking that nothing of its job was left running on any of them."""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import jobs
import netns
from jobs import (COLLECTIVES_TEST, HOSTS_RANK, RUNTIME_TEST, SOURCE_DIR, Job, job_env,
                  rank_lines, ringletrun_argv)
from netns import RSH, Hosts

why = netns.why_unavailable()
if why:
    pytest.skip(why, allow_module_level=True)

# The collectives' checks without the slow segment sweeps (collectives_test's
# own ctest entries run them): every collective, every root, many sizes,
# and the placement derived from the host names.
COLLECTIVES_FILTER = "--gtest_filter=-Allreduce.Segments*:Large.*"
COLLECTIVES_FEW = ("--gtest_filter=Allreduce.LargeSizes:Allgather.*:Broadcast.*:Alltoall.*:"
                   "Reducescatter.PostscaleJoinsTheAverage:Placement.*")

# Prints where the rank runs, then becomes the rank's command.
PLACED = ["sh", "-c", 'echo "PLACED $RINGLET_RANK $(hostname) $RINGLET_LOCAL_RANK"; exec "$@"',
          "placed"]


def host_list(hosts, slots):
    return ",".join(f"{name}:{n}" for name, n in zip(hosts.names, slots))


def assert_placed(output, expected):
    """expected: per rank, (host name, local rank)."""
    placed = {}
    for line in sum(rank_lines(output).values(), []):
        if line.startswith("PLACED "):
            _, rank, host, local = line.split()
            placed[int(rank)] = (host, int(local))
    assert placed == dict(enumerate(expected)), output


def assert_gtest_passed(status, output):
    """The GoogleTest binary passed on every rank: every rank exited 0 and
    none reported a failure; rank 0 (the one that prints the summary) ran
    tests and passed them all."""
    assert status == 0, output
    assert "[  FAILED  ]" not in output, output
    lines = rank_lines(output).get(0, [])
    def counts(pattern):
        return [int(m.group(1)) for line in lines if (m := re.match(pattern, line))]

    ran = counts(r"\[==========\] Running (\d+) test")
    assert len(ran) == 1 and ran[0] > 0, output
    skipped = counts(r"\[  SKIPPED \] (\d+) test")
    assert counts(r"\[  PASSED  \] (\d+) test") == [ran[0] - sum(skipped)], output


def proc_environ(pid):
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    items = raw.decode(errors="replace").split("\0")
    return dict(item.split("=", 1) for item in items if "=" in item)


def rank_pids(hosts, i):
    """{rank: pid} of the hosts_rank processes running on host i."""
    found = {}
    for pid in hosts.pids(i):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        rank = proc_environ(pid).get("RINGLET_RANK")
        if exe == "hosts_rank" and rank is not None:
            found[int(rank)] = pid
    return found


def sockets(hosts, i):
    """Host i's TCP sockets: (state, local address, local port, peer address, peer port, users)."""
    r = hosts.run_in(i, ["ss", "-H", "-tanp"])
    assert r.returncode == 0, r.stderr
    found = []
    for line in r.stdout.splitlines():
        fields = line.split()
        local_address, local_port = fields[3].rsplit(":", 1)
        peer_address, peer_port = fields[4].rsplit(":", 1)
        found.append((fields[0], local_address.strip("[]"), local_port, peer_address.strip("[]"),
                      peer_port, " ".join(fields[5:])))
    return found


def command_lines_containing(text):
    """The processes (on any host: /proc shows them all) whose command line holds `text`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append((int(entry.name), cmdline.replace("\0", " ")))
    return found


class HeldJob:
    """A job of hosts_rank ranks that hold still after their first
    allreduce, until released."""

    def __init__(self, argv_before_command, np, env):
        self.release = Path(tempfile.mkdtemp(prefix="ringlet-hosts-")) / "release"
        self.job = Job([jobs.RINGLETRUN, *argv_before_command, "-np", str(np),
                        HOSTS_RANK, "hold", str(self.release)], env)
        self.np = np

    def __enter__(self):
        try:
            self.job.wait_for(r"^\[\d+\]<stdout>:READY ", self.np, timeout=40)
        except BaseException:
            self._end(kill=True)
            raise
        return self

    def __exit__(self, kind, error, trace):
        status = self._end(kill=error is not None)
        if error is None:
            assert status == 0, self.job.output
        return False

    def _end(self, kill):
        self.release.touch()
        try:
            if kill:
                self.job.kill()
                return None
            return self.job.wait(timeout=30)
        finally:
            self.release.unlink()
            self.release.parent.rmdir()


# auto: shared memory within each host, TCP across; tcp: TCP everywhere
# (the collectives_test entries already run every size over TCP on one host).
@pytest.mark.parametrize("transport, tests", [("auto", COLLECTIVES_FILTER),
                                              ("tcp", COLLECTIVES_FEW)], ids=["auto", "tcp"])
def test_collectives_two_hosts_two_ranks_each(transport, tests):
    with Hosts(2) as hosts:
        status, output = jobs.run(
            ringletrun_argv(["-H", host_list(hosts, [2, 2])], 4,
                            PLACED + [COLLECTIVES_TEST, tests]),
            job_env(RINGLET_TRANSPORT=transport), timeout=120)
        assert_gtest_passed(status, output)
        a, b = hosts.names
        assert_placed(output, [(a, 0), (a, 1), (b, 0), (b, 1)])
    assert hosts.left_running == {}


def test_collectives_through_a_hostfile_and_the_rsh_variable():
    with Hosts(2) as hosts, tempfile.NamedTemporaryFile("w", suffix=".hosts") as hostfile:
        hostfile.write(f"# two hosts\n{hosts.names[0]} slots=2\n{hosts.names[1]} slots=2\n")
        hostfile.flush()
        status, output = jobs.run(
            ringletrun_argv(["--hostfile", hostfile.name], 4,
                            PLACED + [COLLECTIVES_TEST, COLLECTIVES_FEW], rsh=False),
            job_env(RINGLET_RSH=RSH), timeout=120)
        assert_gtest_passed(status, output)
        a, b = hosts.names
        assert_placed(output, [(a, 0), (a, 1), (b, 0), (b, 1)])
    assert hosts.left_running == {}


def test_collectives_three_hosts_one_rank_each():
    with Hosts(3) as hosts:
        # A host named without slots has one.
        status, output = jobs.run(
            ringletrun_argv(["-H", ",".join(hosts.names)], 3,
                            PLACED + [COLLECTIVES_TEST, COLLECTIVES_FEW]),
            job_env(), timeout=120)
        assert_gtest_passed(status, output)
        assert_placed(output, [(name, 0) for name in hosts.names])
    assert hosts.left_running == {}


def test_runtime_named_collectives_across_hosts():
    with Hosts(2) as hosts:
        status, output = jobs.run(
            ringletrun_argv(["-H", host_list(hosts, [2, 2])], 4,
                            [RUNTIME_TEST, "--gtest_filter=Runtime.*:LifeCycle.*"]),
            job_env(), timeout=120)
        assert_gtest_passed(status, output)
    assert hosts.left_running == {}


def test_python_package_across_hosts():
    pythonpath = os.environ.get("RINGLET_TEST_PYTHONPATH") or \
        f"{SOURCE_DIR / 'build' / 'python'}:{SOURCE_DIR / 'tests' / 'python'}"
    with Hosts(2) as hosts:
        status, output = jobs.run(
            ringletrun_argv(["-H", host_list(hosts, [1, 1])], 2,
                            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(SOURCE_DIR / "tests" / "python" / "test_numpy.py")]),
            job_env(PYTHONPATH=pythonpath, OMP_NUM_THREADS="1"), timeout=120)
        assert status == 0, output
        lines = rank_lines(output)
        summaries = [next((line for line in lines.get(r, []) if re.search(r"\d+ passed", line)), "")
                     for r in range(2)]
        counts = {re.search(r"(\d+) passed", s).group(1) if s else None for s in summaries}
        assert None not in counts and len(counts) == 1, output
        assert not any(re.search(r"failed|error|skipped", s) for s in summaries), output
    assert hosts.left_running == {}


def test_every_line_comes_back_prefixed_with_its_rank():
    with Hosts(2) as hosts:
        # --rsh is split into words: here a shell that runs the remote shell.
        status, output = jobs.run(
            ringletrun_argv(["--rsh", f"sh {RSH}", "-H", host_list(hosts, [2, 2])], 4,
                            ["sh", "-c", 'for i in 1 2 3; do '
                                         'echo "out $i of $RINGLET_RANK on $(hostname)"; '
                                         'echo "err $i of $RINGLET_RANK" >&2; done'], rsh=False),
            job_env(), timeout=60)
        assert status == 0, output
        out, err = rank_lines(output, "stdout"), rank_lines(output, "stderr")
        for rank in range(4):
            host = hosts.names[rank // 2]
            assert out[rank] == [f"out {i} of {rank} on {host}" for i in (1, 2, 3)], output
            assert err[rank] == [f"err {i} of {rank}" for i in (1, 2, 3)], output
        # Nothing else reached the output: every line is one rank's.
        prefixed = re.compile(r"^\[[0-3]\]<std(out|err)>:")
        assert all(prefixed.match(line) for line in output.splitlines()), output
    assert hosts.left_running == {}


def test_a_remote_rank_that_fails_is_named_with_its_host():
    with Hosts(2) as hosts:
        status, output = jobs.run(
            ringletrun_argv(["-H", host_list(hosts, [1, 1])], 2,
                            ["sh", "-c", '[ "$RINGLET_RANK" = 1 ] && exit 7; exit 0']),
            job_env(), timeout=60)
        assert status != 0, output
        assert re.search(rf"rank 1 \(on {hosts.names[1]}\) exited with status 7", output), output
    assert hosts.left_running == {}


@pytest.fixture(scope="module")
def killed_rank_job():
    """Two hosts of two ranks allreducing until rank 3 (on the second host)
    is killed with SIGKILL from outside: (exit status, output, seconds from
    the kill to the job's end, host names, what was left running)."""
    with Hosts(2) as hosts:
        job = Job(ringletrun_argv(["-H", host_list(hosts, [2, 2])], 4, [HOSTS_RANK, "loop"]),
                  job_env(RINGLET_TIMEOUT_SECONDS="10", RINGLET_ABORT_GRACE_SECONDS="10"))
        try:
            job.wait_for(r"^\[\d\]<stdout>:READY ", 4, timeout=40)
            victim = rank_pids(hosts, 1)
            assert sorted(victim) == [2, 3], (victim, job.output)
            killed_at = time.monotonic()
            os.kill(victim[3], signal.SIGKILL)
            status = job.wait(timeout=30)
            took = time.monotonic() - killed_at
        finally:
            job.kill()
    return status, job.output, took, hosts.names, hosts.left_running


def test_a_remote_rank_killed_mid_run_ends_the_job_naming_it(killed_rank_job):
    status, output, took, names, left_running = killed_rank_job
    assert status != 0, output
    named = rf"^ringletrun: rank 3 \(on {names[1]}\) was killed by signal 9"
    assert re.search(named, output, re.M), output
    # Every survivor failed on its own (the launcher did not have to stop
    # it), well before the launcher's 10 s grace ran out.
    lines = rank_lines(output)
    for rank in (0, 1, 2):
        assert any(line.startswith(f"LOST {rank}: ") for line in lines.get(rank, [])), output
    assert took < 10, f"the job took {took:.1f} s to end after the kill:\n{output}"
    assert left_running == {}


def test_every_survivor_names_the_rank_that_was_killed(killed_rank_job):
    status, output, *_ = killed_rank_job
    lines = rank_lines(output)
    for rank in (0, 1, 2):
        said = [line for line in lines.get(rank, []) if line.startswith(f"LOST {rank}: ")]
        assert said and "rank 3" in said[0], f"rank {rank} does not name rank 3:\n{output}"


def wait_until_empty(hosts, seconds):
    """Waits until no process runs on any of the hosts; returns what still
    runs when the time is up ({} if nothing)."""
    deadline = time.monotonic() + seconds
    while True:
        running = {name: hosts.pids(i) for i, name in enumerate(hosts.names) if hosts.pids(i)}
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.05)


def test_sigterm_to_the_launcher_stops_every_host():
    with Hosts(2) as hosts:
        job = Job(ringletrun_argv(["-H", host_list(hosts, [1, 1])], 2, [HOSTS_RANK, "loop"]),
                  job_env())
        try:
            job.wait_for(r"^\[\d\]<stdout>:READY ", 2, timeout=40)
            assert all(hosts.pids(i) for i in range(2))
            job.process.send_signal(signal.SIGTERM)
            status = job.wait(timeout=30)
        finally:
            job.kill()
        assert status != 0, job.output
        assert wait_until_empty(hosts, 1) == {}, job.output
    assert hosts.left_running == {}


def test_ranks_stop_when_the_launcher_is_gone():
    with Hosts(2) as hosts:
        job = Job(ringletrun_argv(["-H", host_list(hosts, [1, 1])], 2, [HOSTS_RANK, "loop"]),
                  job_env())
        try:
            job.wait_for(r"^\[\d\]<stdout>:READY ", 2, timeout=40)
            assert all(hosts.pids(i) for i in range(2))
            # Only the launcher: its agents see their stdin close.
            os.kill(job.process.pid, signal.SIGKILL)
            # SIGTERM to each rank at once, SIGKILL 3 s later at the latest.
            left = wait_until_empty(hosts, 3 + 3)
        finally:
            job.kill()
        assert left == {}, {name: [netns.process_text(p) for p in pids]
                            for name, pids in left.items()}
    assert hosts.left_running == {}


def test_a_cut_link_ends_the_job_with_an_error_naming_the_peer():
    with Hosts(2) as hosts:
        job = Job(ringletrun_argv(["-H", host_list(hosts, [1, 1])], 2, [HOSTS_RANK, "loop"]),
                  job_env(RINGLET_TIMEOUT_SECONDS="3", RINGLET_ABORT_GRACE_SECONDS="5"))
        try:
            job.wait_for(r"^\[\d\]<stdout>:READY ", 2, timeout=40)
            cut_at = time.monotonic()
            hosts.cut_link(1)
            status = job.wait(timeout=30)
        finally:
            job.kill()
        took = time.monotonic() - cut_at
        assert status != 0, job.output
        lost = rank_lines(job.output)
        for rank, peer in ((0, 1), (1, 0)):
            said = [line for line in lost.get(rank, []) if line.startswith(f"LOST {rank}: ")]
            assert said and f"rank {peer}" in said[0], job.output
        named = r"ringletrun: rank [01] \(on rl\w+\) exited with status 3"
        assert re.search(named, job.output), job.output
        # The 3 s deadline, then the survivor's own grace at most.
        assert took < 3 + 5 + 2, f"the job took {took:.1f} s to end after the cut:\n{job.output}"
    assert hosts.left_running == {}


def test_the_job_secret_is_on_no_command_line():
    with Hosts(2) as hosts:
        with HeldJob(["--rsh", RSH, "-H", host_list(hosts, [1, 1])], 2, job_env()):
            secrets_seen = {proc_environ(pid).get("RINGLET_SECRET")
                            for i in range(2) for pid in rank_pids(hosts, i).values()}
            assert len(secrets_seen) == 1 and None not in secrets_seen, secrets_seen
            secret = secrets_seen.pop()
            assert len(secret) >= 32
            # The scan finds what is there: a decoy with a marker on its command line.
            marker = f"decoy{os.getpid()}x{time.monotonic_ns()}"
            decoy = hosts.popen_in(1, [sys.executable, "-c", "import time; time.sleep(30)", marker])
            try:
                deadline = time.monotonic() + 10
                while not command_lines_containing(marker):
                    assert time.monotonic() < deadline, "the scan never saw the decoy"
                    time.sleep(0.02)
            finally:
                decoy.kill()
                decoy.wait()
            assert command_lines_containing(secret) == []
    assert hosts.left_running == {}


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_links_stay_on_the_hosts_addresses_and_follow_the_transport(transport):
    with Hosts(2) as hosts:
        with HeldJob(["--rsh", RSH, "-H", host_list(hosts, [2, 2])], 4,
                     job_env(RINGLET_TRANSPORT=transport)):
            rendezvous = proc_environ(rank_pids(hosts, 0)[0])["RINGLET_RENDEZVOUS"]
            assert rendezvous.rsplit(":", 1)[0] == hosts.names[0]
            store_port = rendezvous.rsplit(":", 1)[1]
            for i in range(2):
                mine, other = hosts.address(i), hosts.address(1 - i)
                found = sockets(hosts, i)
                listening = [s for s in found if s[0] == "LISTEN"]
                assert listening
                for state, address, port, *_ , users in listening:
                    # Never every interface: the host's own address, or loopback.
                    assert address in (mine, "127.0.0.1", "::1"), (state, address, port, users)
                assert any(address == mine and port != store_port
                           for _, address, port, *_ in listening)
                data = [s for s in found if s[0] == "ESTAB" and store_port not in (s[2], s[4])]
                across = [s for s in data if s[3] == other]
                within = [s for s in data if s[3] in (mine, "127.0.0.1")]
                assert across, found
                # auto: shared memory between the ranks of a host, TCP across.
                if transport == "auto":
                    assert within == [], found
                else:
                    assert within, found
    assert hosts.left_running == {}


def test_network_interface_names_the_hosts_interface():
    # The hosts' interface is one this machine lacks: the ranks' hosts are
    # the ones that must have it.
    with Hosts(2, interface="rlnic0") as hosts:
        assert subprocess.run(["ip", "link", "show", "rlnic0"], capture_output=True).returncode != 0
        with HeldJob(["--rsh", RSH, "--network-interface", "rlnic0",
                      "-H", host_list(hosts, [1, 1])], 2, job_env(RINGLET_TRANSPORT="tcp")):
            for i in range(2):
                listening = [s for s in sockets(hosts, i) if s[0] == "LISTEN"]
                assert listening and all(s[1] == hosts.address(i) for s in listening), listening
    assert hosts.left_running == {}


def test_network_interface_that_the_hosts_lack_is_named_with_theirs():
    with Hosts(2) as hosts:
        status, output = jobs.run(
            ringletrun_argv(["--network-interface", "nosuch0", "-H", host_list(hosts, [1, 1])], 2,
                            [HOSTS_RANK, "loop"]),
            job_env(RINGLET_TRANSPORT="tcp", RINGLET_START_TIMEOUT_SECONDS="10"), timeout=60)
        assert status != 0, output
        refusals = [line for line in output.splitlines() if "nosuch0" in line]
        assert refusals, output
        # Which interfaces there are, on the host that refused it.
        assert any("eth0" in line for line in refusals), output
    assert hosts.left_running == {}
