#!/usr/bin/env python3
"""Runs standin_rank through ringletrun with the CUDA and NCCL stand-in
preloaded (tests/gpu/cuda_standin) and checks what each rank did on its
devices, from the stand-in's reports. Each rank's GPU is cuda:(rank + 1), so
that a context made on device 0 (a thread that never chose its device) or a
call on another rank's device shows.

Scenarios:
  nccl        HOROVOD_GPU_OPERATIONS=NCCL: every collective through NCCL.
  ring-hosts  RING with each rank on its own host (RINGLET_HOSTNAME): staged
              through host memory; the broadcast's, allgathers' and alltoall's
              values are checked (copies and the host's own collectives, all
              real; the stand-in's kernels do nothing, so reductions are not).
  ring-host   RING with both ranks on one host: Ringlet's CUDA IPC window.
  lost-peer   NCCL whose collectives never end (RINGLET_STANDIN_NCCL_HANG);
              rank 1 dies mid-allreduce: rank 0's must fail at once (a lost
              peer, RINGLET_TIMEOUT_SECONDS is 60) with its communicator
              aborted, not finalized.
Exit 0 when every check holds, 1 otherwise (each failure printed).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

NP = 2
TIMEOUT_SECONDS = 60  # RINGLET_TIMEOUT_SECONDS of every run: a wait on it shows


class Checks:
    def __init__(self):
        self.failures = []

    def expect(self, ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            self.failures.append(what)


def run_job(args, scenario, report_dir):
    env = dict(os.environ)
    for name in ("RINGLET_RANK", "RINGLET_SIZE", "RINGLET_RENDEZVOUS", "LD_PRELOAD"):
        env.pop(name, None)
    env.update({
        "RINGLET_STANDIN_DEVICES": "4",
        "RINGLET_STANDIN_REPORT_DIR": report_dir,
        "RINGLET_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
        "HOROVOD_GPU_OPERATIONS": "RING" if scenario.startswith("ring") else "NCCL",
    })
    rank_cmd = ["env", "LD_PRELOAD=" + args.standin, args.rank_program]
    if scenario == "lost-peer":
        env["RINGLET_STANDIN_NCCL_HANG"] = "1"
        # Rank 0 must fail on its own, long before ringletrun would stop it.
        env["RINGLET_ABORT_GRACE_SECONDS"] = str(TIMEOUT_SECONDS)
        rank_cmd.append("lost-peer")
    else:
        rank_cmd.append("collectives")
    if scenario == "ring-hosts":
        rank_cmd = ["sh", args.as_two_hosts] + rank_cmd + ["--check-values"]
    cmd = [args.ringletrun, "-np", str(NP)] + rank_cmd
    print("+ " + " ".join(cmd), flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=TIMEOUT_SECONDS + 30)
    print(proc.stdout, end="")
    print("ringletrun exited %d after %.1f s" % (proc.returncode, time.monotonic() - start))
    return proc


def read_reports(report_dir):
    reports = {}
    for path in sorted(glob.glob(os.path.join(report_dir, "*.json"))):
        with open(path) as f:
            report = json.load(f)
        if report.get("rank") is not None:
            reports[int(report["rank"])] = report
    return reports


def check_devices(c, rank, report):
    """Every context and every call that needs one on the rank's own GPU."""
    own = rank + 1
    c.expect(report["contexts"] == [own],
             "rank %d: contexts only on its own cuda:%d (got %s)" % (rank, own, report["contexts"]))
    others = {d: calls for d, calls in report["context_calls"].items() if int(d) != own}
    c.expect(not others, "rank %d: no call that needs a context on another device (got %s)"
             % (rank, others))
    c.expect(not report["stream_mismatches"],
             "rank %d: no call on a stream of another device than the current one (got %s)"
             % (rank, report["stream_mismatches"]))
    c.expect(not report["errors"], "rank %d: no misuse of CUDA (got %s)" % (rank, report["errors"]))
    c.expect(not report["nccl"]["wrong_device"],
             "rank %d: no NCCL call on another device than its communicator's (got %s)"
             % (rank, report["nccl"]["wrong_device"]))
    c.expect(not report["nccl"]["misuse"],
             "rank %d: no NCCL call on an ended communicator (got %s)"
             % (rank, report["nccl"]["misuse"]))


def check_ipc_closed(c, rank, report):
    ipc = report["ipc"]
    c.expect(ipc["mem_opened"] == ipc["mem_closed"],
             "rank %d: every peer allocation opened was closed (%d opened, %d closed)"
             % (rank, ipc["mem_opened"], ipc["mem_closed"]))
    c.expect(ipc["events_opened"] == ipc["events_closed"],
             "rank %d: every peer event opened was destroyed (%d opened, %d destroyed)"
             % (rank, ipc["events_opened"], ipc["events_closed"]))


def check_collectives(c, scenario, proc, reports):
    c.expect(proc.returncode == 0, "ringletrun exited 0 (got %d)" % proc.returncode)
    c.expect(sorted(reports) == list(range(NP)),
             "a stand-in report from every rank (got ranks %s)" % sorted(reports))
    sets = re.findall(r"STANDIN-SETS live_before=(-?\d+) live_with_set=(-?\d+) "
                      r"live_after=(-?\d+)", proc.stdout)
    c.expect(len(sets) == NP, "every rank ran the process-set step (%d did)" % len(sets))
    for rank, report in sorted(reports.items()):
        check_devices(c, rank, report)
        c.expect(report["launches"].get(str(rank + 1), 0) > 0,
                 "rank %d: kernels launched on its device (%s)" % (rank, report["launches"]))
        check_ipc_closed(c, rank, report)
        comms = report["nccl"]["communicators"]
        if scenario == "nccl":
            c.expect(len(comms) >= 2, "rank %d: a NCCL communicator for the world and one for its "
                     "own process set (got %d)" % (rank, len(comms)))
            for comm in comms:
                c.expect(comm["device"] == rank + 1 and not comm["blocking"],
                         "rank %d: NCCL communicator %d is non-blocking on cuda:%d (cuda:%d, "
                         "blocking %s)" % (rank, comm["id"], rank + 1, comm["device"],
                                           comm["blocking"]))
                c.expect(comm["finalized"] and comm["destroyed"] and not comm["aborted"],
                         "rank %d: NCCL communicator %d finalized and destroyed, not aborted "
                         "(%s)" % (rank, comm["id"], comm))
            called = set()
            for comm in comms:
                called |= set(comm["calls"])
            wanted = {"ncclAllReduce", "ncclBroadcast", "ncclAllGather", "ncclReduceScatter",
                      "ncclSend", "ncclRecv"}
            c.expect(wanted <= called, "rank %d: NCCL ran %s (called %s)"
                     % (rank, sorted(wanted), sorted(called)))
        else:
            c.expect(not comms, "rank %d: no NCCL communicator under RING (got %d)"
                     % (rank, len(comms)))
        if scenario == "ring-host":
            c.expect(report["ipc"]["mem_opened"] > 0,
                     "rank %d: the CUDA IPC window opened its peer's allocation (%d opened)"
                     % (rank, report["ipc"]["mem_opened"]))
        if scenario == "ring-hosts":
            c.expect(report["ipc"]["mem_opened"] == 0,
                     "rank %d: ranks on two hosts open no CUDA IPC handle (%d opened)"
                     % (rank, report["ipc"]["mem_opened"]))
    if scenario == "nccl":
        for before, with_set, after in sets:
            c.expect(int(with_set) == int(before) + 1 and int(after) == int(before),
                     "a removed process set's NCCL communicator went with it (live: %s before, "
                     "%s with the set, %s after its removal)" % (before, with_set, after))


def check_lost_peer(c, proc, reports):
    found = re.search(r"STANDIN-RESULT seconds=([\d.]+) code=(\d+) shutdown_seconds=([\d.]+)",
                      proc.stdout)
    c.expect(found is not None, "rank 0 reported its failed allreduce")
    if found is None:
        return
    seconds, code, shutdown = float(found.group(1)), int(found.group(2)), float(found.group(3))
    c.expect(seconds < TIMEOUT_SECONDS / 4,
             "rank 0's allreduce failed in %.1f s, well within RINGLET_TIMEOUT_SECONDS=%d"
             % (seconds, TIMEOUT_SECONDS))
    c.expect(code == 4, "rank 0's allreduce failed as a lost peer (code 4, got %d)" % code)
    c.expect(shutdown < TIMEOUT_SECONDS / 4,
             "rank 0's shutdown() returned in %.1f s" % shutdown)
    report = reports.get(0)
    c.expect(report is not None, "a stand-in report from rank 0")
    if report is None:
        return
    check_devices(c, 0, report)
    comms = report["nccl"]["communicators"]
    c.expect(len(comms) == 1, "rank 0: one NCCL communicator (got %d)" % len(comms))
    for comm in comms:
        c.expect(comm["calls"].get("ncclAllReduce", 0) >= 1 and comm["hung"],
                 "rank 0: the allreduce reached NCCL, which never ended it (%s)" % comm)
        c.expect(comm["aborted"] and not comm["finalized"],
                 "rank 0: the communicator was aborted (ncclCommAbort), not finalized (%s)"
                 % comm)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=["nccl", "ring-hosts", "ring-host", "lost-peer"])
    parser.add_argument("--ringletrun", required=True)
    parser.add_argument("--standin", required=True, help="libringlet_cuda_standin.so")
    parser.add_argument("--rank-program", required=True, help="standin_rank")
    parser.add_argument("--as-two-hosts", required=True, help="tests/collectives/as_two_hosts.sh")
    args = parser.parse_args()
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="ringlet-standin-") as report_dir:
        proc = run_job(args, args.scenario, report_dir)
        reports = read_reports(report_dir)
        for rank, report in sorted(reports.items()):
            print("rank %d report: %s" % (rank, json.dumps(report, sort_keys=True)))
        if args.scenario == "lost-peer":
            check_lost_peer(c, proc, reports)
        else:
            check_collectives(c, args.scenario, proc, reports)
    if c.failures:
        print("%d check(s) failed" % len(c.failures))
        return 1
    print("every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
