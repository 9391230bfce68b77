#!/usr/bin/env python3
"""Ringlet's allreduce across hosts beside Open MPI's, in the same run, on
hosts made of network namespaces (tests/hosts/netns.py; needs root).

For each link (unshaped, then shaped with tc: --rate, and --delay where the
kernel has netem) and each transport, one job under mpirun spans the hosts
(mpirun itself on the first host, the others reached through the namespaces'
remote shell), and ringlet-bench alternates Ringlet and Open MPI op by op
(`--backend ring,mpi`): the fair comparison on a noisy machine. Each host's
processes are pinned to a core of their own (taskset; Open MPI's binding is
off), so that two cores give two hosts. --hierarchical adds, on the shaped
link, Ringlet at 2 hosts x 2 ranks flat against hierarchical (two runs
through ringletrun -H).

    tools/hosts-bench.py [--transports tcp,ucx] [--rate 10gbit] [--delay 50us]
                         [-b 1M] [-e 64M] [-n 20] [--hierarchical]
"""

import argparse
import csv
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "hosts"))
import netns  # noqa: E402

BIN = ROOT / "build" / "bin"


def pinning_rsh(hosts, folder):
    """A remote shell that runs each host's processes on a core of its own. As
    ssh does, it hands its words to the host's shell as one command line
    (Open MPI quotes its daemon's arguments for that shell)."""
    cases = "\n".join(f"  {name}) core={i % os.cpu_count()} ;;" for i, name in enumerate(hosts.names))
    script = Path(folder) / "pinned_rsh.sh"
    script.write_text(f"""#!/bin/sh
case "$1" in
{cases}
  *) echo "pinned_rsh: unknown host $1" >&2; exit 2 ;;
esac
host=$1
shift
exec taskset -c "$core" {netns.RSH} "$host" sh -c "$*"
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def bench_args(a, csv_path):
    return ["allreduce", "-b", a.b, "-e", a.e, "-f", "4", "-n", str(a.n), "-w", "5", "-c", "1",
            "--csv", csv_path]


def under_mpirun(hosts, rsh, transport, a, folder):
    """ringlet-bench --backend ring,mpi across the hosts, one rank each."""
    out = str(Path(folder) / f"mpi-{transport}.csv")
    hostlist = ",".join(f"{n}:1" for n in hosts.names)
    argv = [rsh, hosts.names[0], "mpirun", "--allow-run-as-root", "-np", str(len(hosts.names)),
            "-H", hostlist, "--bind-to", "none", "--mca", "plm_rsh_agent", rsh,
            "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "eth0",
            "--mca", "oob_tcp_if_include", "eth0",
            "-x", f"RINGLET_TRANSPORT={transport}", "-x", "PATH",
            str(BIN / "ringlet-bench"), "--backend", "ring,mpi"] + bench_args(a, out)
    run = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
    if run.returncode != 0:
        raise RuntimeError(f"mpirun ({transport}) failed:\n{run.stdout}\n{run.stderr}")
    return read_csv(out)


def under_ringletrun(hosts, rsh, per_host, extra_env, a, folder, tag):
    out = str(Path(folder) / f"ringletrun-{tag}.csv")
    hostlist = ",".join(f"{n}:{per_host}" for n in hosts.names)
    env = dict(os.environ, **extra_env)
    argv = [str(BIN / "ringletrun"), "--rsh", rsh, "-np", str(per_host * len(hosts.names)),
            "-H", hostlist, str(BIN / "ringlet-bench"), "--per-op-barrier"] + bench_args(a, out)
    run = subprocess.run(argv, capture_output=True, text=True, timeout=1200, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"ringletrun ({tag}) failed:\n{run.stdout}\n{run.stderr}")
    return read_csv(out)


def read_csv(path):
    """{(impl, bytes): row} of the out-of-place rows."""
    rows = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if not row["impl"].endswith("-inplace"):
                rows[(row["impl"], int(row["bytes"]))] = row
    return rows


def size_text(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def comparison_table(title, rows, left, right):
    print(f"\n### {title}\n")
    print(f"| size | {left} time | p50 | p99 | {right} time | p50 | p99 | {left}/{right} speed |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in sorted({b for (_, b) in rows}):
        l, r = rows.get((left, size)), rows.get((right, size))
        if not l or not r:
            continue
        def us(row, key):
            return f"{float(row[key]):.0f}"
        ratio = float(r["p50_us"]) / float(l["p50_us"])
        print(f"| {size_text(size)} | {us(l, 'time_us')} | {us(l, 'p50_us')} | {us(l, 'p99_us')} "
              f"| {us(r, 'time_us')} | {us(r, 'p50_us')} | {us(r, 'p99_us')} | {ratio:.2f}x |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transports", default="tcp")
    parser.add_argument("--rate", default="10gbit")
    parser.add_argument("--delay", default="50us")
    parser.add_argument("-b", default="1M")
    parser.add_argument("-e", default="64M")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--hierarchical", action="store_true")
    a = parser.parse_args()
    why = netns.why_unavailable()
    if why:
        sys.exit(f"hosts-bench: cannot make hosts here: {why}")
    delay = a.delay or None
    if delay:
        try:
            with netns.Hosts(2, rate=a.rate, delay=delay):
                pass
        except netns.HostsUnavailable as e:
            print(f"(no delay: {e}; the shaped link is {a.rate} alone)")
            delay = None
    links = [("unshaped", {}), (f"shaped {a.rate}" + (f" {delay}" if delay else ""),
                                {"rate": a.rate, "delay": delay})]
    print("Times in microseconds per allreduce (float32 sum) at the slowest rank: `time` is "
          "ringlet-bench's (the median when alternating, else the mean), p50 and p99 over the "
          "iterations; speed = the right column's p50 / the left's.")
    with tempfile.TemporaryDirectory() as folder:
        for link, shape in links:
            with netns.Hosts(2, **shape) as hosts:
                rsh = pinning_rsh(hosts, folder)
                for transport in a.transports.split(","):
                    rows = under_mpirun(hosts, rsh, transport, a, folder)
                    rows = {("ringlet" if impl == "ringlet" else "mpi", b): r
                            for (impl, b), r in rows.items()}
                    comparison_table(f"2 hosts x 1 rank, {link} link, Ringlet over {transport} "
                                     f"vs Open MPI (same run, alternating)", rows, "ringlet", "mpi")
            if a.hierarchical and shape:
                with netns.Hosts(2, **shape) as hosts:
                    rsh = pinning_rsh(hosts, folder)
                    flat = under_ringletrun(hosts, rsh, 2, {"HOROVOD_HIERARCHICAL_ALLREDUCE": "0"},
                                            a, folder, "flat")
                    hier = under_ringletrun(hosts, rsh, 2, {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"},
                                            a, folder, "hierarchical")
                    rows = {("hierarchical", b): r for (_, b), r in hier.items()}
                    rows.update({("flat", b): r for (_, b), r in flat.items()})
                    comparison_table(f"2 hosts x 2 ranks, {link} link: hierarchical vs flat "
                                     f"(two runs)", rows, "hierarchical", "flat")


if __name__ == "__main__":
    main()
