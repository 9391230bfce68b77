"""Ringlet jobs inside PySpark, as ``horovod.spark.run`` runs them.

``run(fn, ...)`` runs ``fn`` on ``num_proc`` Spark tasks at once, in
Spark's barrier execution mode (every task starts together, or the stage
fails), one rank per task, and returns ``fn``'s return values ordered by
rank. Each task starts its rank as a process of its own (so that Spark's
reused Python workers never hold a Ringlet runtime); ranks keep each host's
tasks together, and meet at the rendezvous store of rank 0's task, whose
address the tasks share through the barrier's ``allGather``. The job's
secret is made on the driver and reaches the ranks in their environment.

A rank that fails fails its task, and with it the barrier stage: Spark ends
the other tasks, whose rank processes die with them; the exception raised
here is a ``RankFailure`` naming the rank, with its traceback, raised from
Spark's error (which is Spark's own where no rank failed). A rank
that failed only because another one did (a lost peer, a missed deadline)
reports a moment later, so that Spark's first failure is the cause.

``run_elastic(fn, ...)`` runs an elastic job on Spark tasks
(ringlet.spark.elastic): workers come and go with the tasks, and the job
goes on from its last commit.

Not served yet: the estimators (``TorchEstimator``, ``KerasEstimator`` and
their Stores)."""

import itertools
import logging
import os
import re
import time

from ringlet.runner import job
from ringlet.runner.failures import RankFailure
from ringlet.runner.rank_process import run_rank

# How long a task whose rank failed because another rank did waits before it
# fails, so that the stage fails on the task of the rank that caused it.
_SECOND_HAND_DELAY_SECONDS = 3.0

_job_ids = itertools.count()


def run(fn, args=(), kwargs={}, num_proc=None, start_timeout=None, env=None, stdout=None,
        stderr=None, verbose=1, nics=None, executable=None):
    """Runs ``fn(*args, **kwargs)`` as a Ringlet job of ``num_proc`` ranks,
    one per Spark task, and returns the list of its return values by rank.

    Args:
        fn: the function each rank runs; it calls ``hvd.init()`` itself.
        args, kwargs: its arguments (pickled with cloudpickle).
        num_proc: the number of ranks; Spark's default parallelism if None.
        start_timeout: seconds the ranks may take to meet (the rendezvous);
            ``HOROVOD_SPARK_START_TIMEOUT`` if None, else 600.
        env: variables set in every rank's environment (beside the task's).
        stdout, stderr: streams that receive each rank's output, its lines
            prefixed ``[rank]<stdout>:`` / ``[rank]<stderr>:``, once it ends;
            where None, the rank's output goes to the Spark task's own.
        verbose: 0 says nothing; 1 logs the job's size; 2 also has the
            ranks log their choices (HOROVOD_LOG_LEVEL=info).
        nics: network interfaces the job may use (Horovod's set); the first
            by name carries the rendezvous and the links, and all of them
            NCCL's sockets (NCCL_SOCKET_IFNAME, unless the ranks have one).
        executable: the Python that runs each rank; the task's own if None.
    """
    spark_context, start_timeout, num_proc = _job_of(start_timeout, num_proc, verbose)
    if num_proc < 1:
        raise ValueError(f"num_proc must be at least 1, not {num_proc}")

    rank_env = dict(env or {})
    if verbose >= 2:
        rank_env.setdefault("HOROVOD_LOG_LEVEL", "info")
    task = _Task(fn, tuple(args), dict(kwargs), rank_env, start_timeout,
                 set(nics) if nics else None, job.new_secret(), job.new_job_id(),
                 capture_output=stdout is not None or stderr is not None, executable=executable)

    group = f"ringlet.spark.run.{next(_job_ids)}"
    spark_context.setJobGroup(group, f"ringlet.spark.run of {num_proc} ranks",
                              interruptOnCancel=True)
    try:
        rdd = spark_context.parallelize(range(num_proc), num_proc)
        ended = rdd.barrier().mapPartitions(task).collect()
    except BaseException as e:
        spark_context.cancelJobGroup(group)
        failure = _rank_failure_in(e)
        if failure is not None:
            raise failure from e
        raise
    finally:
        # The group was this thread's for the job alone: the caller's later
        # Spark jobs are not in it.
        for name in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            spark_context.setLocalProperty(name, None)
    ended.sort(key=lambda r: r[0])
    for rank, _, out, err in ended:
        _forward(rank, "stdout", out, stdout)
        _forward(rank, "stderr", err, stderr)
    return [value for _, value, _, _ in ended]


def run_elastic(fn, args=(), kwargs={}, num_proc=None, min_num_proc=None, max_num_proc=None,
                start_timeout=None, elastic_timeout=None, reset_limit=None, env=None,
                stdout=None, stderr=None, verbose=1, nics=None,
                prefix_output_with_timestamp=False, min_np=None, max_np=None):
    """Runs ``fn(*args, **kwargs)`` as an elastic Ringlet job on Spark
    tasks, one worker per task, and returns the return values of the
    workers that finished, by their rank in the job's last round. ``fn``
    trains with ``hvd.elastic.run`` (it calls ``hvd.init()`` itself).

    Args:
        num_proc: the workers the job starts with; Spark's default
            parallelism if None.
        min_num_proc: the fewest workers the job goes on with (num_proc if None).
        max_num_proc: the most workers, and the number of Spark tasks the job
            has (num_proc if None).
        start_timeout: seconds the first num_proc tasks may take to register;
            ``HOROVOD_SPARK_START_TIMEOUT`` if None, else 600.
        elastic_timeout: seconds the job waits for min_num_proc workers after
            losing some; ``HOROVOD_ELASTIC_TIMEOUT`` if None, else 600.
        reset_limit: the most times the job may re-form before it fails.
        env, verbose, nics: as ``run``.
        stdout, stderr: streams that receive each worker's lines as they
            come, prefixed ``[worker]<stdout>:`` (the worker named by its
            task attempt); where None, they go where the Spark task's go.
        prefix_output_with_timestamp: kept for Horovod's signature; the lines
            are prefixed by rank alone.
        min_np, max_np: Horovod's deprecated names of min_num_proc and
            max_num_proc.
    """
    from ringlet.runner import elastic_driver
    from ringlet.spark import elastic

    min_num_proc, max_num_proc = elastic_driver.sizes_renamed(min_num_proc, max_num_proc,
                                                              min_np, max_np)
    spark_context, start_timeout, num_proc = _job_of(start_timeout, num_proc, verbose)
    if elastic_timeout is None:
        elastic_timeout = int(os.getenv("HOROVOD_ELASTIC_TIMEOUT", "600"))
    min_num_proc = num_proc if min_num_proc is None else min_num_proc
    max_num_proc = num_proc if max_num_proc is None else max_num_proc
    if not 1 <= min_num_proc <= num_proc <= max_num_proc:
        raise ValueError(f"need 1 <= min_num_proc {min_num_proc} <= num_proc {num_proc} <= "
                         f"max_num_proc {max_num_proc}")

    rank_env = dict(env or {})
    if verbose >= 2:
        rank_env.setdefault("HOROVOD_LOG_LEVEL", "info")
    settings = elastic_driver.Settings(num_proc, min_num_proc, max_num_proc, elastic_timeout,
                                       reset_limit, start_timeout=start_timeout)
    # The job group is set in the thread that runs the Spark job, not the caller's.
    group = f"ringlet.spark.run_elastic.{next(_job_ids)}"
    return elastic.run_job(spark_context, group, fn, args, kwargs, settings, rank_env,
                           set(nics) if nics else None, stdout, stderr, max_num_proc)


def _job_of(start_timeout, num_proc, verbose):
    """(the active SparkContext, the start timeout, the job's size), their
    defaults filled in as Horovod fills them."""
    import pyspark

    spark_context = pyspark.SparkContext._active_spark_context
    if spark_context is None:
        raise Exception("Could not find an active SparkContext, are you running in a PySpark "
                        "session?")
    if start_timeout is None:
        start_timeout = int(os.getenv("HOROVOD_SPARK_START_TIMEOUT", "600"))
    if num_proc is None:
        num_proc = spark_context.defaultParallelism
        if verbose >= 1:
            logging.info("Running %d processes (inferred from spark.default.parallelism)...",
                         num_proc)
    elif verbose >= 1:
        logging.info("Running %d processes...", num_proc)
    return spark_context, start_timeout, num_proc


def _rank_failure_in(spark_error):
    """The RankFailure a task raised, read back from the text of Spark's
    error (which wraps it in the Python worker's traceback and the JVM's
    stack); None where the job failed otherwise."""
    found = _TASK_FAILURE.search(str(spark_error))
    if found is None:
        return None
    failure = RankFailure(int(found.group(1)), "")
    failure.args = (found.group(0)[len("RuntimeError: "):].rstrip(),)
    return failure


# A task's RuntimeError as Spark's error quotes it: up to Spark's own lines.
_TASK_FAILURE = re.compile(r"RuntimeError: rank (\d+) failed: .*?(?=\n SQLSTATE|\n\tat |\Z)",
                           re.DOTALL)


def _forward(rank, name, text, stream):
    if stream is None or not text:
        return
    for line in text.splitlines():
        stream.write(f"[{rank}]<{name}>:{line}\n")
    stream.flush()


class _Task:
    """What each barrier task runs (pickled to the executors)."""

    def __init__(self, fn, args, kwargs, env, start_timeout, nics, secret, job_id,
                 capture_output, executable):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.env = env
        self.start_timeout = start_timeout
        self.nics = nics
        self.secret = secret
        self.job_id = job_id
        self.capture_output = capture_output
        self.executable = executable

    def __call__(self, _partition):
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        index = context.partitionId()
        # One entry per task, ordered by partition: the executor (host:port)
        # each runs on.
        hosts = [info.address.rsplit(":", 1)[0] for info in context.getTaskInfos()]
        placement = job.place_workers(hosts)[index]
        offer = job.rendezvous_address(hosts[index], self.nics) if placement.rank == 0 else ""
        rendezvous = next(a for a in context.allGather(offer) if a)

        env = job.without_job(os.environ)
        env.update(self.env)
        env.update(job.rank_environment(placement, rendezvous, self.secret, self.job_id,
                                        self.start_timeout))
        env.update(job.interface_environment(self.nics, env))
        ended = run_rank(placement.rank, self.fn, self.args, self.kwargs, env,
                         capture_output=self.capture_output, executable=self.executable)
        if ended.failure is not None:
            if ended.failure.second_hand:
                time.sleep(_SECOND_HAND_DELAY_SECONDS)
            message = str(ended.failure)
            if ended.stderr:
                message += "\n-- its stderr, last lines --\n" + "\n".join(
                    ended.stderr.splitlines()[-20:])
            raise RuntimeError(message)
        yield (placement.rank, ended.value, ended.stdout, ended.stderr)
