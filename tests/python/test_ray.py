"""ringlet.ray.RayExecutor on a Ray instance started by the suite
(ray.init(num_cpus=4)): jobs of 2 and 4 workers whose collectives are
checked, run/execute/run_remote/execute_single, callbacks receiving what the
ranks log, a rank that raises failing the call with its own error, and a PyTorch training function whose ranks
end with the same weights."""

import subprocess
import time

import pytest

import engine_jobs

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
    yield
    ray.shutdown()


@pytest.fixture
def executor(ray_cluster, request):
    from ringlet.ray import RayExecutor

    settings = RayExecutor.create_settings(timeout_s=60, placement_group_timeout_s=60)
    job = RayExecutor(settings, num_workers=request.param, cpus_per_worker=1)
    job.start()
    yield job
    job.shutdown()
    assert_no_worker_left()


def assert_no_worker_left():
    """shutdown() ended every rank's actor process."""
    deadline = time.monotonic() + 30
    while rank_workers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rank_workers() == []


def rank_workers():
    found = subprocess.run(["pgrep", "-f", "ray::RankWorker"], capture_output=True, text=True)
    return found.stdout.split()


@pytest.mark.parametrize("executor", [2, 4], indirect=True)
def test_run_returns_each_ranks_value_in_rank_order(executor):
    size = len(executor.workers)
    engine_jobs.check_collectives(executor.run(engine_jobs.collectives_job, args=[3]), size, 3)
    # The workers stay: a second run is a second job on the same ranks.
    engine_jobs.check_collectives(executor.run(engine_jobs.collectives_job, kwargs={"salt": 4}),
                                  size, 4)


class Counter:
    def __init__(self, start):
        self.value = start

    def __call__(self):
        self.value += 1
        return self.value


@pytest.mark.parametrize("executor", [2], indirect=True)
def test_execute_run_remote_and_execute_single(executor):
    import os

    ranks = executor.run(lambda: int(os.environ["HOROVOD_RANK"]))
    assert ranks == [0, 1]
    refs = executor.run_remote(lambda x: x * int(os.environ["RINGLET_RANK"]), args=[10])
    assert ray.get(refs) == [0, 10]
    assert executor.execute_single(lambda executable: os.environ["RINGLET_RANK"]) == "0"


def test_executable_cls_and_extra_env_vars(ray_cluster):
    from ringlet.ray import RayExecutor

    job = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=2)
    job.start(executable_cls=Counter, executable_args=[5],
              extra_env_vars={"RINGLET_RAY_TEST": "seen"})
    try:
        assert job.execute(lambda counter: counter()) == [6, 6]
        assert job.execute(lambda counter: counter()) == [7, 7]
        import os
        assert job.run(lambda: os.environ["RINGLET_RAY_TEST"]) == ["seen", "seen"]
    finally:
        job.shutdown()
    assert_no_worker_left()


@pytest.mark.parametrize("users", [None, "=eth9"])
def test_nics_name_the_ranks_interface_and_nccls_unless_the_user_named_one(ray_cluster, users):
    from ringlet.ray import RayExecutor

    job = RayExecutor(RayExecutor.create_settings(timeout_s=60, nics=["lo"]), num_workers=2)
    job.start(extra_env_vars={} if users is None else {"NCCL_SOCKET_IFNAME": users})
    try:
        import os
        got = job.run(lambda: (os.environ.get("RINGLET_NETWORK_INTERFACE"),
                               os.environ.get("NCCL_SOCKET_IFNAME")))
        assert got == [("lo", users or "lo")] * 2
    finally:
        job.shutdown()
    assert_no_worker_left()


@pytest.mark.parametrize("executor", [3], indirect=True)
def test_a_rank_that_raises_fails_the_call_with_its_error(executor):
    from ringlet.runner.failures import RankFailure

    with pytest.raises(RankFailure) as failed:
        executor.run(engine_jobs.failing_job, args=[1])
    assert failed.value.rank == 1
    text = str(failed.value)
    assert text.startswith("rank 1 failed: Traceback") and "(boom-1)" in text, text


def log_rank(times):
    import os

    from ringlet.ray import ray_logger

    for i in range(times):
        ray_logger.log({"rank": int(os.environ["RINGLET_RANK"]), "i": i})
    return "done"


@pytest.mark.parametrize("executor", [2], indirect=True)
def test_callbacks_receive_every_value_the_ranks_log(executor):
    seen, also = [], []
    assert executor.run(log_rank, args=[3], callbacks=[seen.append, also.append]) == \
        ["done", "done"]
    want = sorted((r, i) for r in range(2) for i in range(3))
    assert sorted((v["rank"], v["i"]) for v in seen) == want
    assert also == seen
    # Each rank's values arrive in the order it logged them.
    assert [v["i"] for v in seen if v["rank"] == 1] == [0, 1, 2]
    # Without callbacks, a logged value goes nowhere (with a warning).
    from ringlet.ray import ray_logger

    with pytest.warns(UserWarning, match="no callbacks"):
        ray_logger.log({"nowhere": 1})


@pytest.mark.parametrize("executor", [2], indirect=True)
def test_a_callback_that_raises_fails_the_call_with_its_error(executor):
    def bad(_info):
        raise KeyError("the callback's own error")

    with pytest.raises(KeyError, match="the callback's own error"):
        executor.run(log_rank, args=[1], callbacks=[bad])


@pytest.mark.parametrize("executor", [2], indirect=True)
def test_torch_training_ends_with_the_same_weights_on_every_rank(executor):
    pytest.importorskip("torch")
    engine_jobs.check_training(executor.run(engine_jobs.training_job, args=[12]), 2)


def test_bad_arguments_are_refused(ray_cluster):
    from ringlet.ray import RayExecutor

    settings = RayExecutor.create_settings()
    with pytest.raises(ValueError, match="not both"):
        RayExecutor(settings, num_workers=2, num_hosts=1)
    with pytest.raises(ValueError, match="not both"):
        RayExecutor(settings, num_workers=2, min_workers=1)
    with pytest.raises(ValueError, match="max_workers needs a positive min_workers"):
        RayExecutor(settings, max_workers=2)
    with pytest.raises(ValueError, match="at least 1"):
        RayExecutor(settings, num_workers=0)
    with pytest.raises(RuntimeError, match="call start"):
        RayExecutor(settings, num_workers=2).run(print)


def test_a_placement_group_ray_cannot_grant_times_out_naming_it(ray_cluster):
    from ringlet.ray import RayExecutor

    job = RayExecutor(RayExecutor.create_settings(placement_group_timeout_s=3), num_workers=8)
    with pytest.raises(TimeoutError, match="placement group of 8 workers"):
        job.start()
