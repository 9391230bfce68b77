"""ringlet.spark.run_elastic on PySpark in local mode with task retries
(local[4,3]: a failed task runs again, up to 3 times): a job of 2 whose
collectives are checked; a worker killed mid-epoch, whose task Spark runs
again, leaves the others to roll back to their last commit, and the job
grows back with the new attempt and finishes with the weights every worker
agrees on; a job whose workers keep failing ends with the first failure."""

import os
import socket
import subprocess
import sys

import pytest

import engine_jobs

pyspark = pytest.importorskip("pyspark")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "elastic"))
from records import records  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    session = engine_jobs.local_spark_session("local[4,3]", "ringlet-spark-elastic-tests")
    yield session
    session.stop()


def assert_no_rank_left():
    found = subprocess.run(["pgrep", "-f", "ringlet.runner.rank_main"], capture_output=True,
                           text=True).stdout.split()
    assert found == [], f"rank processes left running: {found}"


def worker(task, attempt):
    """The worker of a task's attempt, as the job names it (its records' prefix)."""
    return f"{socket.gethostname()}-task{task}.{attempt}_0"


def test_run_elastic_returns_each_workers_value_by_rank(spark):
    import ringlet.spark

    results = ringlet.spark.run_elastic(engine_jobs.collectives_job, args=(6,), num_proc=2)
    want = engine_jobs.expected_collectives(2, 6)
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["size"] == 2
        # Each task is a host of its own, as Horovod's elastic Spark tasks are.
        assert (r["local_rank"], r["local_size"]) == (0, 1)
        assert (r["sum"], r["average"], r["gathered"]) == \
            (want["sum"], want["average"], want["gathered"])
    assert_no_rank_left()


def test_nics_name_each_workers_interface_and_nccls(spark):
    import ringlet.spark

    def interfaces_job():
        import ringlet.numpy as hvd

        hvd.init()
        rank = hvd.rank()
        hvd.shutdown()
        return rank, os.environ.get("RINGLET_NETWORK_INTERFACE"), \
            os.environ.get("NCCL_SOCKET_IFNAME")

    results = ringlet.spark.run_elastic(interfaces_job, num_proc=2, nics=["lo"])
    assert results == [(0, "lo", "lo"), (1, "lo", "lo")]
    assert_no_rank_left()


def printing_job():
    import ringlet.numpy as hvd

    hvd.init()
    rank = hvd.rank()
    print(f"hello from rank {rank}", flush=True)
    print(f"a warning from rank {rank}", file=sys.stderr, flush=True)
    hvd.shutdown()
    return rank


def test_each_workers_lines_reach_the_given_streams_by_worker(spark):
    import io

    import ringlet.spark

    out, err = io.StringIO(), io.StringIO()
    assert ringlet.spark.run_elastic(printing_job, num_proc=2, stdout=out, stderr=err) == [0, 1]
    for rank in range(2):
        said = [line for line in out.getvalue().splitlines()
                if line.endswith(f"<stdout>:hello from rank {rank}")]
        assert len(said) == 1, out.getvalue()
        assert said[0].startswith(f"[{socket.gethostname()}-task"), said
        assert f"<stderr>:a warning from rank {rank}" in err.getvalue(), err.getvalue()
    assert "hello" not in err.getvalue()
    assert_no_rank_left()


def test_a_killed_worker_rolls_back_and_its_tasks_next_attempt_rejoins(spark, tmp_path):
    pytest.importorskip("torch")
    import ringlet.spark

    out = str(tmp_path)
    killed = worker(1, 0)
    results = ringlet.spark.run_elastic(engine_jobs.elastic_training_job, args=(out,),
                                        kwargs={"kill_worker": killed}, num_proc=3,
                                        min_num_proc=2, elastic_timeout=120)
    names = sorted(name for name, _ in results)
    assert names == sorted([worker(0, 0), worker(1, 1), worker(2, 0)]), names
    assert all(params == results[0][1] for _, params in results), "final weights differ"
    assert records(out, killed, "final") == []
    # The survivors re-formed without it, from a commit (every 3 batches).
    worlds = records(out, worker(0, 0), "world")
    assert worlds[0]["size"] == 3 and len(worlds) >= 2, worlds
    assert worlds[1]["batch"] % 3 == 0, worlds
    # The new attempt began where the others were, not at the start.
    first = records(out, worker(1, 1), "world")[0]
    assert (first["epoch"], first["batch"]) != (0, 0), first
    assert_no_rank_left()


def always_failing():
    import ringlet.numpy as hvd

    hvd.init()
    raise ValueError(f"worker {os.environ['RINGLET_ELASTIC_WORKER']} cannot go on (boom)")


def test_a_job_whose_workers_keep_failing_ends_with_the_first_failure(spark):
    import ringlet.spark

    with pytest.raises(RuntimeError, match="the elastic Spark job failed") as failed:
        ringlet.spark.run_elastic(always_failing, num_proc=2, elastic_timeout=20)
    text = str(failed.value)
    assert "ValueError: worker" in text and "(boom)" in text, text
    assert_no_rank_left()


def test_bad_sizes_are_refused(spark):
    import ringlet.spark

    with pytest.raises(ValueError, match="min_num_proc 3 <= num_proc 2"):
        ringlet.spark.run_elastic(print, num_proc=2, min_num_proc=3)
