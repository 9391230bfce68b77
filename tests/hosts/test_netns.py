"""The namespaced-hosts harness itself (netns.py, netns_rsh.sh): what it
makes, that the hosts reach each other by name and nothing else, link cuts
and shaping, and a teardown that leaves nothing behind and says what it
had to stop."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import netns
from netns import RSH, Hosts, HostsUnavailable

why = netns.why_unavailable()
if why:
    pytest.skip(why, allow_module_level=True)

PORT = 7000

# Listens on the given address, says so, then answers one connection: it
# reads to EOF and replies with its host name and the bytes and seconds read.
SERVER = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket()
    s.bind((sys.argv[1], int(sys.argv[2])))
    s.listen(1)
    print("listening", flush=True)
    c, _ = s.accept()
    start, got = time.monotonic(), 0
    while chunk := c.recv(1 << 16):
        got += len(chunk)
    c.sendall(f"{socket.gethostname()} {got} {time.monotonic() - start:.3f}".encode())
    c.close()
""")

# Connects to host:port by name, sends N bytes, prints the server's answer.
CLIENT = textwrap.dedent("""
    import socket, sys
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[4]))
    s.sendall(b"x" * int(sys.argv[3]))
    s.shutdown(socket.SHUT_WR)
    print(s.recv(200).decode(), flush=True)
""")


def serve(hosts, i):
    server = hosts.popen_in(i, [sys.executable, "-c", SERVER, hosts.address(i), str(PORT)],
                            stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "listening"
    return server


def send(hosts, frm, to_name, nbytes=5, timeout=5.0):
    return hosts.run_in(frm, [sys.executable, "-c", CLIENT, to_name, str(PORT), str(nbytes),
                              str(timeout)], timeout=timeout + 20)


def netns_list():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def links():
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def wait_until_in(hosts, i, pid):
    """Waits until `pid` (started by popen_in) runs inside host i."""
    deadline = time.monotonic() + 10
    while pid not in hosts.pids(i):
        assert time.monotonic() < deadline, f"{pid} never entered {hosts.names[i]}"
        time.sleep(0.02)


def assert_gone(hosts):
    """Nothing of `hosts` remains: namespaces, links, /etc/netns folders, record."""
    listed = netns_list()
    for name in hosts.names:
        assert name not in listed
        assert not (netns.NETNS_ETC / name).exists()
    assert f"rl{hosts.id}" not in links()
    assert not (netns.STATE_DIR / f"{hosts.id}.json").exists()


def test_each_host_is_a_namespace_with_its_own_name_address_and_hosts_file():
    with Hosts(3) as hosts:
        assert len(set(hosts.names)) == 3
        assert all(re.fullmatch(rf"rl{hosts.id}h{i}", n) for i, n in enumerate(hosts.names))
        assert re.fullmatch(r"10\.\d+\.\d+\.0/24", hosts.subnet)
        listed = netns_list()
        # The bridge has no address: the root namespace is on no host's subnet.
        bridge = subprocess.run(["ip", "-o", "addr", "show", "dev", hosts.bridge],
                                capture_output=True, text=True)
        assert bridge.returncode == 0 and " inet " not in bridge.stdout
        for i, name in enumerate(hosts.names):
            assert name in listed
            r = hosts.run_in(i, ["sh", "-c", "hostname; ip -o -4 addr show"])
            assert r.returncode == 0, r.stderr
            assert r.stdout.splitlines()[0] == name
            addresses = re.findall(r"^\d+: (\S+)\s+inet (\S+)", r.stdout, re.M)
            assert sorted(addresses) == [("eth0", f"{hosts.address(i)}/24"), ("lo", "127.0.0.1/8")]
            # One route, the hosts' subnet: nothing leaves it.
            routes = hosts.run_in(i, ["ip", "route"]).stdout.splitlines()
            assert len(routes) == 1, routes
            assert routes[0].split()[:3] == [hosts.subnet, "dev", "eth0"], routes
            # Every host resolves every host's name, and localhost.
            resolve = "import socket, sys; print(*map(socket.gethostbyname, sys.argv[1:]))"
            r = hosts.run_in(i, [sys.executable, "-c", resolve, *hosts.names, "localhost"])
            expected = [hosts.address(j) for j in range(3)] + ["127.0.0.1"]
            assert r.stdout.split() == expected, r.stderr
    assert hosts.left_running == {}
    assert_gone(hosts)


def test_hosts_reach_each_other_by_name_and_the_host_names_differ():
    with Hosts(2) as hosts:
        server = serve(hosts, 1)
        r = send(hosts, 0, hosts.names[1])
        assert r.returncode == 0, r.stderr
        assert r.stdout.split()[:2] == [hosts.names[1], "5"]
        server.wait(timeout=10)
    assert hosts.left_running == {}


def test_this_machine_is_out_of_reach_from_a_host():
    # A listener on every address of this machine (the root namespace):
    # nothing on a host reaches it, there is no route out of the hosts' subnet.
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    own = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                         capture_output=True, text=True).stdout
    # Without an address of its own, a documentation address stands in: no
    # route leads there either.
    addresses = re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", own) or ["192.0.2.1"]
    try:
        with Hosts(1) as hosts:
            for address in addresses:
                r = hosts.run_in(0, [sys.executable, "-c", CLIENT, address, str(port), "1", "2"])
                assert r.returncode != 0 and "unreachable" in r.stderr, (address, r.stderr)
        assert hosts.left_running == {}
    finally:
        listener.close()


def test_a_cut_link_drops_traffic_silently_until_restored():
    with Hosts(2) as hosts:
        server = serve(hosts, 1)
        hosts.cut_link(1)
        start = time.monotonic()
        r = send(hosts, 0, hosts.names[1], timeout=1.5)
        assert r.returncode != 0
        # Dropped, not refused: the connect runs into its own timeout.
        assert "timed out" in r.stderr, r.stderr
        assert time.monotonic() - start >= 1.4
        hosts.restore_link(1)
        r = send(hosts, 0, hosts.names[1], timeout=10)
        assert r.returncode == 0, r.stderr
        server.wait(timeout=10)
    assert hosts.left_running == {}


def test_rate_shaping_limits_what_a_host_sends():
    nbytes = 2 << 20
    with Hosts(2, rate="20mbit") as hosts:
        qdisc = hosts.run_in(0, ["tc", "qdisc", "show", "dev", "eth0"]).stdout
        assert "tbf" in qdisc and "rate 20Mbit" in qdisc, qdisc
        server = serve(hosts, 1)
        r = send(hosts, 0, hosts.names[1], nbytes=nbytes, timeout=30)
        assert r.returncode == 0, r.stderr
        name, got, seconds = r.stdout.split()
        assert int(got) == nbytes
        # 2 MiB at 20 Mbit/s, less the 256 KiB bucket that leaves at once:
        # at least 0.73 s; at most 23 Mbit/s measured whatever the load.
        megabits = nbytes * 8 / float(seconds) / 1e6
        assert megabits < 25, f"{megabits:.1f} Mbit/s through a 20 Mbit/s link"
        server.wait(timeout=10)
    assert hosts.left_running == {}


def netem_works():
    """Whether this kernel serves netem, asked in a scratch namespace of its own."""
    scratch = f"rlnetem{os.getpid()}"
    subprocess.run(["ip", "netns", "add", scratch], check=True)
    try:
        tc = ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1us"]
        return subprocess.run(["ip", "netns", "exec", scratch, *tc],
                              capture_output=True).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", scratch], check=True)


def test_delay_shaping_needs_netem_and_says_so_where_missing():
    hosts = Hosts(2, delay="50us", rate="1gbit")
    if netem_works():
        with hosts:
            qdisc = hosts.run_in(0, ["tc", "qdisc", "show", "dev", "eth0"]).stdout
            assert "netem" in qdisc and "delay 50us" in qdisc and "rate 1Gbit" in qdisc, qdisc
        assert hosts.left_running == {}
    else:
        with pytest.raises(HostsUnavailable, match=r"netem qdisc is needed for delay shaping"):
            hosts.open()
    assert_gone(hosts)


def test_teardown_stops_and_reports_what_was_left_running():
    with Hosts(2) as hosts:
        sleeper = hosts.popen_in(1, ["sleep", "300"])
        wait_until_in(hosts, 1, sleeper.pid)
        # A process that ignores SIGTERM and forks is stopped all the same.
        stubborn = hosts.popen_in(0, ["sh", "-c", "trap '' TERM; sleep 301 & sleep 302; wait"])
        deadline = time.monotonic() + 5
        while len(hosts.pids(0)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert set(hosts.pids(1)) == {sleeper.pid}
    assert sleeper.wait(timeout=5) == -signal.SIGKILL
    assert stubborn.wait(timeout=5) == -signal.SIGKILL
    assert hosts.left_running[hosts.names[1]] == [f"{sleeper.pid} sleep 300"]
    left0 = hosts.left_running[hosts.names[0]]
    assert any("sleep 301" in p for p in left0) and any("sleep 302" in p for p in left0), left0
    assert_gone(hosts)
    # Closing again changes nothing and says the same.
    assert hosts.close() == hosts.left_running


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_teardown_runs_when_the_block_raises(error):
    with pytest.raises(error):
        with Hosts(2) as hosts:
            sleeper = hosts.popen_in(0, ["sleep", "300"])
            wait_until_in(hosts, 0, sleeper.pid)
            raise error("inside the block")
    assert list(hosts.left_running) == [hosts.names[0]]
    assert_gone(hosts)


def test_a_process_entering_a_host_during_teardown_is_stopped_too():
    # The remote shell may have opened the namespace just before teardown
    # deleted its name: it still gets in, and must not outlive the hosts.
    for _ in range(5):
        with Hosts(1) as hosts:
            late = hosts.popen_in(0, ["sleep", "300"], stderr=subprocess.DEVNULL)
        assert late.wait(timeout=10) != 0
        assert_gone(hosts)


def test_instances_at_once_never_share_names_or_subnets():
    with Hosts(2) as a, Hosts(2) as b:
        assert not set(a.names) & set(b.names)
        assert a.bridge != b.bridge and a.subnet != b.subnet
        server = serve(b, 1)
        assert send(b, 0, b.names[1]).returncode == 0
        server.wait(timeout=10)
        # One instance's hosts are not on the other's bridge, nor do they know its names.
        r = a.run_in(0, [sys.executable, "-c", CLIENT, b.address(1), str(PORT), "1", "1"])
        assert r.returncode != 0
        r = a.run_in(0, ["getent", "hosts", b.names[1]])
        assert r.returncode != 0
    assert a.left_running == {} and b.left_running == {}
    assert_gone(a)
    assert_gone(b)


def test_hosts_of_a_dead_owner_are_swept_by_the_next_instance():
    owner = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(f"""
            import os, subprocess, sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            import netns
            h = netns.Hosts(2)
            h.open()
            h.popen_in(0, ["sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(h.id, *h.names, flush=True)
            os.kill(os.getpid(), 9)
        """)], capture_output=True, text=True, timeout=60)
    assert owner.returncode == -signal.SIGKILL, owner.stderr
    stale_id, *stale_names = owner.stdout.split()
    record = netns.STATE_DIR / f"{stale_id}.json"
    assert json.loads(record.read_text())["netns"] == stale_names
    assert all(name in netns_list() for name in stale_names)
    with Hosts(1):
        listed = netns_list()
        assert not any(name in listed for name in stale_names)
        assert f"rl{stale_id}" not in links()
        assert not record.exists()
        assert not any((netns.NETNS_ETC / name).exists() for name in stale_names)


def test_the_remote_shell_passes_status_stdin_environment_and_signals():
    with Hosts(1) as hosts:
        name = hosts.names[0]
        script = 'read x; echo "$x $(hostname) $RL_TEST_WORD"; exit 7'
        r = subprocess.run([RSH, name, "sh", "-c", script],
                           input="through\n", capture_output=True, text=True, timeout=20,
                           env={**os.environ, "RL_TEST_WORD": "kept"})
        assert (r.returncode, r.stdout) == (7, f"through {name} kept\n"), r.stderr
        # The command replaces the shell: a signal to the process the caller
        # started reaches the command, and its death is the caller's status.
        p = subprocess.Popen([RSH, name, "sh", "-c", "echo started; exec sleep 300"],
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline() == "started\n"
        assert hosts.pids(0) == [p.pid]
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == -signal.SIGTERM
        # This machine keeps its own name.
        assert subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip() != name
    assert hosts.left_running == {}
    r = subprocess.run([RSH, "onlyahost"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: netns_rsh.sh HOST CMD" in r.stderr
    r = subprocess.run([RSH, "rlnosuchhost", "true"], capture_output=True, text=True)
    assert r.returncode != 0 and "rlnosuchhost" in r.stderr


def test_why_unavailable_names_the_missing_privilege_or_tool(monkeypatch):
    assert netns.find_why_unavailable() is None
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert "need root" in netns.find_why_unavailable()
    assert "uid 1000" in netns.find_why_unavailable()
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    real_which = netns.shutil.which
    monkeypatch.setattr(netns.shutil, "which", lambda t: None if t == "unshare" else real_which(t))
    assert netns.find_why_unavailable() == "namespaced hosts need unshare, not found on PATH"
