"""ringletrun inside a real Slurm allocation (a one-node cluster of Debian's
slurm-wlm, made by slurm_cluster.py): it hands the ranks to srun, which
starts them as the tasks of a step, and they meet through Slurm's variables.
The stand-in srun of tests/tools covers the same launch without Slurm."""

from __future__ import annotations

import re
import time

import pytest

from jobs import BASE_ENV, COLLECTIVES_TEST, HOSTS_RANK, RINGLETRUN
from slurm_cluster import SlurmCluster, why_unavailable

pytestmark = pytest.mark.skipif(why_unavailable() is not None, reason=why_unavailable() or "")


@pytest.fixture(scope="module")
def cluster():
    with SlurmCluster(cpus=8) as c:
        yield c
    assert c.left_running == {}, f"left running after the cluster stopped: {c.left_running}"


def salloc(cluster, tasks: int, command: list[str], timeout: float = 120):
    return cluster.run(["salloc", f"--ntasks={tasks}", RINGLETRUN, "-np", str(tasks), *command],
                       timeout=timeout, env=BASE_ENV)


def labelled(output: str) -> dict[int, list[str]]:
    """srun --label's lines per task: "2: text"."""
    lines: dict[int, list[str]] = {}
    for line in output.splitlines():
        m = re.match(r"^\s*(\d+): (.*)$", line)
        if m:
            lines.setdefault(int(m.group(1)), []).append(m.group(2))
    return lines


def test_ranks_are_the_tasks_of_an_srun_step(cluster):
    r = salloc(cluster, 3, ["sh", "-c", 'echo "$SLURM_PROCID $SLURM_STEP_ID ${RINGLET_RANK:-unset} '
                                        '${#RINGLET_SECRET} $(ps -o comm= -p $PPID)"'])
    assert r.returncode == 0, r.stdout + r.stderr
    tasks = labelled(r.stdout)
    assert sorted(tasks) == [0, 1, 2], r.stdout
    for task, lines in tasks.items():
        procid, step, rank, secret, parent = lines[0].split()
        # Slurm numbers the ranks; ringletrun's own variables are not set;
        # the secret came through srun's environment; slurmstepd is the parent.
        assert (procid, step, rank, secret) == (str(task), "0", "unset", "64"), lines
        assert parent == "slurmstepd", lines


def test_collectives_under_srun(cluster):
    r = salloc(cluster, 3, [COLLECTIVES_TEST, "--gtest_filter=Allreduce.*:Allgather.*:Broadcast.*"])
    # srun's status is every task's; the test prints its report on rank 0.
    assert r.returncode == 0, r.stdout + r.stderr
    assert any(line.startswith("[  PASSED  ]") for line in labelled(r.stdout).get(0, [])), r.stdout


def test_the_secret_is_on_no_command_line(cluster):
    scan = ("umask 077; f=$(mktemp); printf %s \"$RINGLET_SECRET\" > $f; sleep 0.5; "
            "for c in /proc/[0-9]*/cmdline; do grep -qaF -f $f $c 2>/dev/null && echo found $c; "
            "done; rm -f $f; echo scanned")
    r = salloc(cluster, 2, ["sh", "-c", scan])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "found" not in r.stdout, r.stdout
    assert r.stdout.count("scanned") == 2, r.stdout


def test_a_failing_task_fails_the_job_with_its_status(cluster):
    r = salloc(cluster, 2, ["sh", "-c", "exit $((SLURM_PROCID + 3))"])
    assert r.returncode in (3, 4), r.stdout + r.stderr
    assert "task 0: Exited with exit code 3" in r.stderr, r.stderr


def test_a_task_killed_mid_run_ends_the_step_naming_it(cluster):
    # hosts_rank loop allreduces until stopped; task 1 is killed once every
    # rank has shown a right sum.
    kill_one = ('if [ "$SLURM_PROCID" = 1 ]; then (sleep 2; kill -9 $$) & fi; '
                f'exec {HOSTS_RANK} loop')
    start = time.monotonic()
    r = salloc(cluster, 3, ["sh", "-c", kill_one], timeout=60)
    took = time.monotonic() - start
    assert r.returncode != 0, r.stdout + r.stderr
    assert sorted(t for t, lines in labelled(r.stdout).items()
                  if any(line.startswith("READY") for line in lines)) == [0, 1, 2], r.stdout
    assert "task 1: Killed" in r.stderr, r.stderr
    assert took < 30, f"the step took {took:.1f} s to end"
    r = cluster.run(["pgrep", "-f", HOSTS_RANK], timeout=10)
    assert r.stdout.strip() == "", f"ranks left running: {r.stdout}"
