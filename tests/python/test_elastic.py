"""Elastic jobs under ringletrun --min-np/--max-np --host-discovery-script,
with a discovery script the test rewrites while the job runs, for PyTorch
(TorchState) and TensorFlow 2 Keras (KerasState and the elastic callbacks):
a 3-worker job that loses a worker to SIGKILL mid-epoch goes on with 2 from
the last commit, and a 2-worker job given a third slot grows to 3, the new
worker receiving the state. Every job ends with the same weights on every
worker and leaves no process behind. Every worker gets the network
interface the job was given, for NCCL too. Run by pytest alone (it starts
ringletrun)."""

import glob
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RSH = os.path.join(HERE, "elastic", "local_rsh.sh")
sys.path.insert(0, os.path.join(HERE, "elastic"))
from records import records, wait_for  # noqa: E402


def have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


# Each framework's training script, and the batch its commits leave in the
# state (torch's counts batches done; Horovod's Keras callbacks keep the
# index of the last batch, 0 after an epoch).
FRAMEWORKS = [
    pytest.param(("train_torch.py", lambda batch: batch % 3 == 0), id="torch",
                 marks=pytest.mark.skipif(not have("torch"), reason="torch not installed")),
    pytest.param(("train_keras.py", lambda batch: batch == 0 or (batch + 1) % 3 == 0), id="keras",
                 marks=pytest.mark.skipif(not have("tf_keras"), reason="tf_keras not installed")),
]


def ringletrun():
    return os.environ.get("RINGLET_TEST_RINGLETRUN", "ringletrun")


class ElasticJob:
    def __init__(self, tmp_path, script, hosts, np, min_np, max_np, flags=(), env=None):
        self.out = str(tmp_path / "out")
        os.mkdir(self.out)
        self.hosts_file = tmp_path / "hosts"
        self.set_hosts(hosts)
        discover = tmp_path / "discover.sh"
        discover.write_text(f"#!/bin/sh\ncat {self.hosts_file}\n")
        discover.chmod(0o755)
        self.log = open(tmp_path / "job.log", "w+")
        self.process = subprocess.Popen(
            [ringletrun(), "-np", str(np), "--min-np", str(min_np), "--max-np", str(max_np),
             "--host-discovery-script", str(discover), "--rsh", RSH, "--elastic-timeout", "60",
             *flags,
             sys.executable, os.path.join(HERE, "elastic", script), self.out],
            stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))

    def set_hosts(self, text):
        tmp = str(self.hosts_file) + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.hosts_file)

    def finish(self, timeout=180):
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = None
        self.log.seek(0)
        return code, self.log.read()

    def finals(self):
        return {os.path.basename(p).split(".")[0]: records(self.out, os.path.basename(p)
                                                               .split(".")[0], "final")[-1]
                for p in glob.glob(os.path.join(self.out, "*.final"))}


def assert_nothing_left():
    found = subprocess.run(["pgrep", "-f", os.path.join(HERE, "elastic", "train_")],
                           capture_output=True, text=True).stdout.split()
    assert found == [], f"workers left running: {found}"


def assert_same_weights(finals, size):
    assert len(finals) == size, finals.keys()
    weights = [f["params"] for f in finals.values()]
    assert all(w == weights[0] for w in weights), "the workers' final weights differ"
    assert sorted(f["rank"] for f in finals.values()) == list(range(size))
    assert all(f["size"] == size for f in finals.values())


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_killed_worker_leaves_a_smaller_job_that_finishes(tmp_path, framework):
    script, committed_batch = framework
    job = ElasticJob(tmp_path, script, "h1:1\nh2:1\nh3:1\n", np=3, min_np=2, max_np=3)
    # Mid-epoch, past a commit, at three workers.
    wait_for("h2 to train at 3 workers",
             lambda: any(p[2] == 3 and p[1] >= 5 for p in records(job.out, "h2_0", "progress")))
    pid = records(job.out, "h2_0", "pid")[0]
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    resumed = wait_for("h1 to train at 2 workers",
                       lambda: any(p[2] == 2 for p in records(job.out, "h1_0", "progress")) and
                       time.monotonic())
    print(f"re-formed after the kill in {resumed - killed_at:.2f} s")
    code, log = job.finish()
    assert code == 0, log
    assert "worker h2:0 (rank 1 of round 1) failed: killed by SIGKILL" in log, log
    finals = job.finals()
    assert set(finals) == {"h1_0", "h3_0"}, log
    assert_same_weights(finals, 2)
    # The survivors rolled back to their last commit (a multiple of 3 batches).
    worlds = records(job.out, "h1_0", "world")
    assert [w["size"] for w in worlds] == [3, 2], worlds
    assert committed_batch(worlds[1]["batch"]), worlds
    assert records(job.out, "h1_0", "reset") == [2]
    assert_nothing_left()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_new_slot_grows_the_job_and_the_new_worker_gets_the_state(tmp_path, framework):
    job = ElasticJob(tmp_path, framework[0], "localhost:2\n", np=2, min_np=2, max_np=3)
    wait_for("training at 2 workers",
             lambda: any(p[1] >= 4 for p in records(job.out, "localhost_0", "progress")))
    job.set_hosts("localhost:3\n")
    code, log = job.finish()
    assert code == 0, log
    finals = job.finals()
    assert_same_weights(finals, 3)
    # The new worker began where the others were, not at the start.
    first = records(job.out, "localhost_2", "world")[0]
    assert first["size"] == 3 and (first["epoch"], first["batch"]) != (0, 0), first
    assert records(job.out, "localhost_0", "progress")[0][2] == 2
    assert [w["size"] for w in records(job.out, "localhost_0", "world")] == [2, 3]
    assert_nothing_left()


@pytest.mark.parametrize("through", ["ringletrun", "driver"])
@pytest.mark.parametrize("users", [None, "=eth9"])
def test_the_network_interface_is_nccls_too_unless_the_user_named_one(tmp_path, through, users):
    # Through ringletrun, and the driver started alone (as a user may): each
    # worker gets the interface as RINGLET_NETWORK_INTERFACE and, as horovodrun
    # sets it, NCCL_SOCKET_IFNAME, which stays the user's where set.
    discover = tmp_path / "discover.sh"
    discover.write_text("#!/bin/sh\necho h1:1; echo h2:1\n")
    discover.chmod(0o755)
    show = ["sh", "-c", 'echo "interfaces [$RINGLET_NETWORK_INTERFACE] [$NCCL_SOCKET_IFNAME]"']
    if through == "ringletrun":
        argv = [ringletrun(), "-np", "2", "--min-np", "2", "--host-discovery-script",
                str(discover), "--rsh", RSH, "--network-interface", "lo", *show]
    else:
        argv = [sys.executable, "-m", "ringlet.runner.elastic_driver", "--np", "2",
                "--host-discovery-script", str(discover), "--rsh", RSH, "--ringletrun",
                ringletrun(), "--network-interface", "lo", "--", *show]
    env = {k: v for k, v in os.environ.items() if k != "NCCL_SOCKET_IFNAME"}
    if users is not None:
        env["NCCL_SOCKET_IFNAME"] = users
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if "interfaces" in line]
    want = f"interfaces [lo] [{users or 'lo'}]"
    assert len(lines) == 2 and all(line.endswith(want) for line in lines), done.stdout


def test_elastic_flags_without_a_discovery_script_are_refused():
    done = subprocess.run([ringletrun(), "-np", "2", "--min-np", "1", sys.executable, "-c", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--host-discovery-script" in done.stderr


@pytest.mark.parametrize("bounds,says", [(("0", "5"), "Value 0 not in range 1 to 3600"),
                                         (("5", "2"), "lower limit 5 s is above its upper")])
def test_a_bad_cooldown_range_is_refused(tmp_path, bounds, says):
    done = subprocess.run([ringletrun(), "-np", "1", "--host-discovery-script", "echo localhost",
                           "--blacklist-cooldown-range", *bounds, sys.executable, "-c", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr, done.stderr


def test_a_host_below_its_failure_limit_gets_a_new_worker_and_then_leaves(tmp_path):
    if not have("torch"):
        pytest.skip("torch not installed")
    job = ElasticJob(tmp_path, "train_torch.py", "h1:1\nh2:1\nh3:1\n", np=3, min_np=2, max_np=3,
                     flags=("--blacklist-failures", "2"))
    for kill in range(2):
        wait_for(f"h2's worker {kill + 1} to train at 3 workers",
                 lambda: len(records(job.out, "h2_0", "pid")) == kill + 1 and any(
                     p[2] == 3 for p in records(job.out, "h2_0", "progress")[-1:]))
        os.kill(records(job.out, "h2_0", "pid")[kill], signal.SIGKILL)
    code, log = job.finish()
    assert code == 0, log
    # The first failure: a new worker on h2; the second: h2 leaves the job.
    assert log.count("started worker h2:0") == 2, log
    assert "host h2 failed 2 time(s): dropped from the job" in log, log
    finals = job.finals()
    assert set(finals) == {"h1_0", "h3_0"}, log
    assert_same_weights(finals, 2)
    assert_nothing_left()


def test_a_host_that_left_comes_back_after_its_cooldown(tmp_path):
    if not have("torch"):
        pytest.skip("torch not installed")
    job = ElasticJob(tmp_path, "train_torch.py", "h1:1\nh2:1\nh3:1\n", np=3, min_np=2, max_np=3,
                     flags=("--blacklist-cooldown-range", "1", "2"), env={"ELASTIC_EPOCHS": "8"})
    wait_for("h2 to train at 3 workers",
             lambda: any(p[2] == 3 and p[1] >= 2 for p in records(job.out, "h2_0", "progress")))
    os.kill(records(job.out, "h2_0", "pid")[0], signal.SIGKILL)
    code, log = job.finish()
    assert code == 0, log
    # Its first exclusion: 1 * 2**1 + U(0, 1) s, held to the range's 2 s.
    assert "host h2 failed 1 time(s): dropped from the job for 2.0 s" in log, log
    assert "host h2 ended its cooldown: back in the job" in log, log
    assert log.count("started worker h2:0") == 2, log
    finals = job.finals()
    assert set(finals) == {"h1_0", "h2_0", "h3_0"}, log
    assert_same_weights(finals, 3)
    assert [w["size"] for w in records(job.out, "h1_0", "world")] == [3, 2, 3]
    assert_nothing_left()


def test_a_killed_driver_leaves_no_worker_behind(tmp_path):
    if not have("torch"):
        pytest.skip("torch not installed")
    job = ElasticJob(tmp_path, "train_torch.py", "localhost:2\n", np=2, min_np=2, max_np=2)
    wait_for("training at 2 workers",
             lambda: any(p[1] >= 2 for p in records(job.out, "localhost_0", "progress")))
    job.process.kill()
    job.finish()
    wait_for("the workers to end", lambda: not subprocess.run(
        ["pgrep", "-f", os.path.join(HERE, "elastic", "train_")], capture_output=True).stdout,
        timeout=15)
