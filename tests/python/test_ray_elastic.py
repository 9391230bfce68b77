"""Elastic Ringlet jobs on Ray (RayExecutor(min_workers=...), and Horovod's
earlier ElasticRayExecutor) on a Ray instance the suite starts. Its hosts
are Ray's own node (RayDiscovery) or, where a test needs several, names the
instance holds as resources (node:hostA, ...), reported by a discovery the
test rewrites, as Horovod's Ray tests fake hosts: a worker killed mid-epoch
leaves a smaller job that finishes from its last commit; a new host grows
the job and its worker receives the state; callbacks get rank 0's epochs;
the job asks Ray's autoscaler for room for max_workers while it runs."""

import os
import subprocess
import sys
import time

import pytest

import engine_jobs

ray = pytest.importorskip("ray")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "elastic"))
from records import records, wait_for  # noqa: E402

HOSTS = ("hostA", "hostB", "hostC")


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=4, resources={f"node:{h}": 1 for h in HOSTS}, include_dashboard=False,
             log_to_driver=False, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
    yield
    ray.shutdown()


class FileDiscovery:
    """The hosts a file lists, ``host:slots`` a line (the test rewrites it)."""

    def __init__(self, path, text):
        self.path = path
        self.set(text)

    def set(self, text):
        with open(self.path + ".new", "w") as f:
            f.write(text)
        os.replace(self.path + ".new", self.path)

    def find_available_hosts_and_slots(self):
        with open(self.path) as f:
            return {h: int(n) for h, n in (line.split(":") for line in f.read().split())}


def elastic_executor(tmp_path, hosts, min_workers, max_workers, **kwargs):
    from ringlet.ray import RayExecutor

    settings = RayExecutor.create_settings(timeout_s=60)
    settings.discovery = FileDiscovery(str(tmp_path / "hosts"), hosts)
    executor = RayExecutor(settings, min_workers=min_workers, max_workers=max_workers,
                           override_discovery=False, elastic_timeout=60, **kwargs)
    executor.start()
    return executor


def elastic_workers():
    found = subprocess.run(["pgrep", "-f", "ray::ElasticWorker"], capture_output=True, text=True)
    return found.stdout.split()


def assert_no_worker_left():
    deadline = time.monotonic() + 30
    while elastic_workers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert elastic_workers() == []


def assert_same_weights(results, workers):
    assert sorted(name for name, _ in results) == sorted(workers), results
    assert all(params == results[0][1] for _, params in results), "final weights differ"


def test_nics_name_each_workers_interface_and_nccls_unless_the_user_named_one(ray_cluster,
                                                                           tmp_path):
    from ringlet.ray import RayExecutor

    settings = RayExecutor.create_settings(timeout_s=60, nics=["lo"])
    settings.discovery = FileDiscovery(str(tmp_path / "hosts"), "hostA:1\nhostB:1\n")
    executor = RayExecutor(settings, min_workers=2, max_workers=2, override_discovery=False,
                           elastic_timeout=60)
    executor.start(extra_env_vars={"NCCL_SOCKET_IFNAME": "=eth9"})

    def interfaces():
        import ringlet.numpy as hvd

        hvd.init()
        rank = hvd.rank()
        hvd.shutdown()
        return rank, os.environ.get("RINGLET_NETWORK_INTERFACE"), \
            os.environ.get("NCCL_SOCKET_IFNAME")

    assert executor.run(interfaces) == [(0, "lo", "=eth9"), (1, "lo", "=eth9")]
    assert_no_worker_left()


def test_a_killed_worker_leaves_a_smaller_job_that_finishes(ray_cluster, tmp_path):
    pytest.importorskip("torch")
    executor = elastic_executor(tmp_path, "hostA:2\nhostB:1\n", 2, 3)
    results = executor.run(engine_jobs.elastic_training_job, args=[str(tmp_path)],
                           kwargs={"kill_worker": "hostB_0"})
    # hostB failed once: it left the job (Horovod's rule), and the two
    # workers of hostA finished from their last commit, agreeing.
    assert_same_weights(results, ["hostA_0", "hostA_1"])
    worlds = records(str(tmp_path), "hostA_0", "world")
    assert [w["size"] for w in worlds] == [3, 2], worlds
    assert worlds[1]["batch"] % 3 == 0, worlds
    assert records(str(tmp_path), "hostA_0", "reset") == [2]
    assert records(str(tmp_path), "hostB_0", "final") == []
    assert_no_worker_left()


def test_a_new_host_grows_the_job_and_callbacks_get_rank_0s_epochs(ray_cluster, tmp_path):
    pytest.importorskip("torch")
    import threading

    from ringlet.ray import ray_logger

    executor = elastic_executor(tmp_path, "hostA:2\n", 2, 3)
    out = str(tmp_path)

    def add_host():
        # Ray starts its workers slowly on a loaded machine: minutes, at times.
        wait_for("training at 2 workers",
                 lambda: any(p[1] >= 4 for p in records(out, "hostA_0", "progress")),
                 timeout=300)
        executor.discovery.set("hostA:2\nhostC:1\n")

    grower = threading.Thread(target=add_host)
    grower.start()
    epochs = []
    results = executor.run(engine_jobs.elastic_training_job, args=[out],
                           kwargs={"log": ray_logger.log}, callbacks=[epochs.append])
    grower.join()
    assert_same_weights(results, ["hostA_0", "hostA_1", "hostC_0"])
    first = records(out, "hostC_0", "world")[0]
    assert first["size"] == 3 and (first["epoch"], first["batch"]) != (0, 0), first
    assert [w["size"] for w in records(out, "hostA_0", "world")] == [2, 3]
    # Rank 0 logged each epoch it ended (once more where an epoch re-ran).
    assert [e["epoch"] for e in epochs][-1] == 3 and epochs[-1]["size"] == 3, epochs
    assert_no_worker_left()


class DemandSeen(FileDiscovery):
    """A FileDiscovery that also notes what the job asks of Ray's autoscaler."""

    seen = []

    def find_available_hosts_and_slots(self):
        DemandSeen.seen.append(autoscaler_request())
        return super().find_available_hosts_and_slots()


def autoscaler_request():
    import json

    from ray.autoscaler._private.constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL
    from ray.experimental.internal_kv import _internal_kv_get

    found = _internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL)
    return json.loads(found) if found else None


def test_the_job_asks_the_autoscaler_for_room_to_grow_while_it_runs(ray_cluster, tmp_path):
    from ringlet.ray import RayExecutor

    settings = RayExecutor.create_settings(timeout_s=60)
    settings.discovery = DemandSeen(str(tmp_path / "hosts"), "hostA:2\n")
    executor = RayExecutor(settings, min_workers=2, max_workers=3, override_discovery=False,
                           elastic_timeout=60)
    executor.start()
    results = executor.run(engine_jobs.collectives_job, args=[2])
    assert [r["rank"] for r in results] == [0, 1]
    assert [{"CPU": 1}] * 3 in DemandSeen.seen, DemandSeen.seen
    assert autoscaler_request() == []
    assert_no_worker_left()


def test_ray_discovery_fills_the_node_up_to_max_workers(ray_cluster):
    from ringlet.ray import ElasticRayExecutor
    from ringlet.ray.elastic import RayDiscovery

    # The one node, 4 CPUs: 4 slots of 1 CPU, 2 of 2.
    node = ray.util.get_node_ip_address()
    assert RayDiscovery(cpus_per_worker=1).find_available_hosts_and_slots() == {node: 4}
    assert RayDiscovery(cpus_per_worker=2).find_available_hosts_and_slots() == {node: 2}
    assert RayDiscovery(use_gpu=True).find_available_hosts_and_slots() == {}

    settings = ElasticRayExecutor.create_settings(min_num_proc=2, max_num_proc=2,
                                                  elastic_timeout=60)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1, env_vars={"RINGLET_RAY_TEST": "x"})
    executor.start()
    results = executor.run(lambda: dict(engine_jobs.collectives_job(5),
                                        env=os.environ["RINGLET_RAY_TEST"]))
    assert [r["env"] for r in results] == ["x", "x"]
    engine_jobs.check_collectives(results, 2, 5)
    assert_no_worker_left()


def test_a_job_whose_workers_all_fail_raises_the_first_cause(ray_cluster, tmp_path):
    executor = elastic_executor(tmp_path, "hostA:2\n", 2, 2)
    with pytest.raises(RuntimeError, match="the elastic Ray job failed") as failed:
        executor.run(engine_jobs.failing_job, args=[1])
    cause = failed.value.__cause__
    assert cause is not None and "(boom-1)" in str(cause), failed.value
    assert_no_worker_left()


def test_elastic_calls_without_fixed_ranks_are_refused(ray_cluster, tmp_path):
    from ringlet.ray import RayExecutor

    executor = elastic_executor(tmp_path, "hostA:2\n", 2, 2)
    with pytest.raises(NotImplementedError, match="run_remote"):
        executor.run_remote(print)
    with pytest.raises(NotImplementedError, match="execute_single"):
        executor.execute_single(print)
    with pytest.raises(ValueError, match="settings.discovery"):
        RayExecutor(RayExecutor.create_settings(), min_workers=2, override_discovery=False)
    with pytest.raises(ValueError, match="below min_workers"):
        RayExecutor(RayExecutor.create_settings(), min_workers=3, max_workers=2)
    with pytest.raises(ValueError, match="lower limit"):
        RayExecutor(RayExecutor.create_settings(), min_workers=1, cooldown_range=(0, 5))
