"""An elastic PyTorch job across namespaced hosts (netns.py): its driver
runs on host 0, as a launcher runs on one machine of a cluster, and starts
one worker on each of three hosts (this one through ringletrun's agent, the
others through netns_rsh.sh, as through ssh). A worker killed on host 1
mid-epoch: the job goes on across hosts 0 and 2 from the last commit, ends
with the same weights on both, and leaves nothing running on any host."""

import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest

import netns
from jobs import RINGLETRUN, SOURCE_DIR, Job, job_env
from netns import RSH, Hosts

why = netns.why_unavailable()
if why:
    pytest.skip(why, allow_module_level=True)

TRAIN = SOURCE_DIR / "tests" / "python" / "elastic" / "train_torch.py"
sys.path.insert(0, str(TRAIN.parent))
from records import records, wait_for  # noqa: E402


def test_a_worker_killed_on_one_host_leaves_a_job_across_the_others():
    pytest.importorskip("torch")
    pythonpath = os.environ.get("RINGLET_TEST_PYTHONPATH") or \
        f"{SOURCE_DIR / 'build' / 'python'}:{SOURCE_DIR / 'tests' / 'python'}"
    with Hosts(3) as hosts, tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out")
        os.mkdir(out)
        discover = Path(tmp) / "discover.sh"
        discover.write_text("#!/bin/sh\n" + "".join(f"echo {n}:1\n" for n in hosts.names))
        discover.chmod(0o755)
        job = Job([RSH, hosts.names[0], RINGLETRUN, "--rsh", RSH, "-np", "3", "--min-np", "2",
                   "--max-np", "3", "--host-discovery-script", str(discover),
                   "--elastic-timeout", "60", sys.executable, str(TRAIN), out],
                  job_env(PYTHONPATH=pythonpath, OMP_NUM_THREADS="1"))
        try:
            victim = f"{hosts.names[1]}_0"
            try:
                wait_for("host 1's worker to train at 3 workers",
                         lambda: any(p[2] == 3 and p[1] >= 5
                                     for p in records(out, victim, "progress")))
            except AssertionError as e:
                raise AssertionError(f"{e}; the job's output:\n{job.output}") from None
            os.kill(records(out, victim, "pid")[0], signal.SIGKILL)
            status = job.wait(timeout=180)
        finally:
            job.kill()
        assert status == 0, job.output
        survivors = [f"{hosts.names[i]}_0" for i in (0, 2)]
        finals = [records(out, w, "final")[-1] for w in survivors]
        assert [f["size"] for f in finals] == [2, 2], job.output
        assert finals[0]["params"] == finals[1]["params"], "the survivors' weights differ"
        assert not records(out, victim, "final")
        assert [w["size"] for w in records(out, survivors[0], "world")] == [3, 2]
        # The workers spoke across the hosts' addresses, not one machine's loopback.
        assert f"worker {hosts.names[1]}:0 (rank 1 of round 1) failed" in job.output, job.output
    assert hosts.left_running == {}
