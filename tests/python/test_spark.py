"""ringlet.spark.run on PySpark in local mode (local[4]): jobs of 2 and 4
ranks whose collectives are checked, a rank that raises failing the job with
its own message and leaving nothing running, and a PyTorch training function
whose ranks end with the same weights."""

import io
import subprocess
import sys
import time

import pytest

import engine_jobs

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark():
    session = engine_jobs.local_spark_session("local[4]", "ringlet-spark-tests")
    yield session
    session.stop()


def rank_processes():
    found = subprocess.run(["pgrep", "-f", "ringlet.runner.rank_main"], capture_output=True,
                           text=True)
    return found.stdout.split()


@pytest.mark.parametrize("num_proc", [2, 4])
def test_run_returns_each_ranks_value_in_rank_order(spark, num_proc):
    import ringlet.spark

    results = ringlet.spark.run(engine_jobs.collectives_job, args=(5,), num_proc=num_proc,
                                start_timeout=60)
    engine_jobs.check_collectives(results, num_proc, 5)
    # The job's group was its own: the caller's thread is left without one.
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


def test_num_proc_defaults_to_spark_parallelism(spark):
    import ringlet.spark

    results = ringlet.spark.run(engine_jobs.collectives_job, kwargs={"salt": 2})
    engine_jobs.check_collectives(results, spark.sparkContext.defaultParallelism, 2)


def test_env_reaches_every_rank_and_output_is_forwarded_by_rank(spark):
    import ringlet.spark

    def job():
        import os
        import ringlet.numpy as hvd

        hvd.init()
        print(f"hello from {hvd.rank()} with {os.environ['RINGLET_SPARK_TEST']}")
        hvd.shutdown()
        return os.environ["RINGLET_SPARK_TEST"]

    out = io.StringIO()
    results = ringlet.spark.run(job, num_proc=2, env={"RINGLET_SPARK_TEST": "passed"},
                                stdout=out)
    assert results == ["passed", "passed"]
    lines = out.getvalue().splitlines()
    assert "[0]<stdout>:hello from 0 with passed" in lines
    assert "[1]<stdout>:hello from 1 with passed" in lines


@pytest.mark.parametrize("users", [None, "=eth9"])
def test_nics_name_the_ranks_interface_and_nccls_unless_the_user_named_one(spark, users):
    import ringlet.spark

    def interfaces_job():
        import os

        return os.environ.get("RINGLET_NETWORK_INTERFACE"), os.environ.get("NCCL_SOCKET_IFNAME")

    env = {} if users is None else {"NCCL_SOCKET_IFNAME": users}
    results = ringlet.spark.run(interfaces_job, num_proc=2, nics=["lo"], env=env)
    assert results == [("lo", users or "lo")] * 2


def test_a_rank_that_raises_fails_the_job_with_its_message(spark):
    import ringlet.spark

    from ringlet.runner.failures import RankFailure

    with pytest.raises(RankFailure) as failed:
        ringlet.spark.run(engine_jobs.failing_job, args=(1,), num_proc=3, start_timeout=60)
    text = str(failed.value)
    assert failed.value.rank == 1, text
    assert text.startswith("rank 1 failed: Traceback") and "(boom-1)" in text, text
    # The other tasks were ended, and their rank processes with them.
    deadline = time.monotonic() + 30
    while rank_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rank_processes() == []
    # Spark is usable again.
    engine_jobs.check_collectives(
        ringlet.spark.run(engine_jobs.collectives_job, args=(1,), num_proc=2), 2, 1)


def test_torch_training_ends_with_the_same_weights_on_every_rank(spark):
    pytest.importorskip("torch")
    import ringlet.spark

    results = ringlet.spark.run(engine_jobs.training_job, args=(12,), num_proc=2)
    engine_jobs.check_training(results, 2)


def test_without_a_spark_context_says_so():
    # In a process of its own: this one's SparkContext is active.
    code = ("import ringlet.spark\n"
            "try:\n"
            "    ringlet.spark.run(print, num_proc=2)\n"
            "except Exception as e:\n"
            "    print(e)\n")
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert "Could not find an active SparkContext" in said.stdout, said.stdout + said.stderr
