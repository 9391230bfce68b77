"""Elastic Ringlet jobs on Ray: ``RayExecutor(settings, min_workers=...,
max_workers=...)``, as Horovod's elastic Ray executor runs them.

The elastic driver (ringlet.runner.elastic_driver) runs the job here, in
the caller's process; its hosts come from Ray (``RayDiscovery``: each live
node, named by its IP, with as many slots as its CPUs, and GPUs where
``use_gpu``, hold workers) or from a discovery object of the user's
(``settings.discovery`` with ``find_available_hosts_and_slots()``, where
``override_discovery=False``). Each worker is a Ray actor placed on its
host through the ``node:<host>`` resource Ray gives every node; it runs the
function once, re-forming with the others as they come and go
(``hvd.elastic.run``), and its return value is the job's where it finished.
While the job runs, it asks Ray's autoscaler for room for ``max_workers``
workers (``request_resources``, replacing any earlier request, cleared when
the job ends): the nodes the autoscaler adds show in discovery, and the job
grows onto them."""

import contextlib
import math
import os
import subprocess

from ringlet.runner import elastic_driver, job
from ringlet.ray.worker import leave_job
from ringlet.runner.failures import RankFailure, failure_of, first_cause


class RayDiscovery:
    """The hosts of the Ray cluster: {node IP: slots}, slots being what a
    node's resources hold of workers of ``cpus_per_worker`` CPUs (and
    ``gpus_per_worker`` GPUs where ``use_gpu``)."""

    def __init__(self, use_gpu=False, cpus_per_worker=1, gpus_per_worker=1):
        self.use_gpu = use_gpu
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = gpus_per_worker or 1

    def find_available_hosts_and_slots(self):
        import ray

        hosts = {}
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            resources = node.get("Resources", {})
            slots = resources.get("CPU", 0) // self.cpus_per_worker
            if self.use_gpu:
                slots = min(slots, resources.get("GPU", 0) // self.gpus_per_worker)
            if slots >= 1:
                hosts[node["NodeManagerAddress"]] = int(math.floor(slots))
        return hosts


class _Discover:
    """The driver's discovery call over a discovery object: None (keep the
    last hosts) where it raised."""

    def __init__(self, discovery):
        self.discovery = discovery

    def __call__(self):
        try:
            return dict(self.discovery.find_available_hosts_and_slots())
        except Exception as e:  # a user's discovery: the job goes on with the last hosts
            elastic_driver.log(f"host discovery ({type(self.discovery).__name__}) failed ({e}); "
                               f"keeping the hosts it reported last")
            return None


class ElasticWorker:
    """The Ray actor of one elastic worker: runs the job's function once."""

    def run(self, env, fn, executable, queue, nics=None):
        """``fn(executable_cls(*args, **kwargs))`` (``fn(None)`` without a
        class) in environment ``env`` (and that of the interfaces ``nics``),
        as (outcome, value or RankFailure)."""
        from ringlet.ray import ray_logger

        for name in [n for n in os.environ if n not in job.without_job(os.environ)]:
            del os.environ[name]
        os.environ.update(env)
        os.environ.update(job.interface_environment(nics, os.environ))
        ray_logger.configure(queue)
        try:
            cls, args, kwargs = executable
            return "done", fn(cls(*args, **kwargs) if cls is not None else None)
        except SystemExit as e:
            # The driver dropped this worker (its host left the job).
            return ("stopped", None) if e.code in (0, None) else (
                "failed", RankFailure(_rank(), f"it exited with status {e.code}"))
        except BaseException as e:
            leave_job()
            return "failed", failure_of(_rank(), e)


def _rank():
    return int(os.environ.get("RINGLET_RANK", "-1"))


class _WorkerHandle:
    """An ElasticWorker as the driver sees a worker process: poll() gives
    its return code once it ended (0 finished, 1 failed or died)."""

    STOP_GRACE_SECONDS = 0.5

    def __init__(self, actor, future):
        self.actor = actor
        self.future = future
        self.returncode = None
        self.value = None
        self.failure = None
        self.how_it_ended = None

    def poll(self):
        import ray

        if self.returncode is not None:
            return self.returncode
        ready, _ = ray.wait([self.future], timeout=0)
        if not ready:
            return None
        try:
            outcome, payload = ray.get(self.future)
        except ray.exceptions.RayError as e:
            outcome, payload = "died", None
            cause = str(e).strip().splitlines()
            self.how_it_ended = (f"its Ray actor died ({type(e).__name__}"
                                 + (f": {cause[0][:200]}" if cause else "") + ")")
        if outcome in ("done", "stopped"):
            self.returncode, self.value = 0, payload
        else:
            self.returncode = 1
            self.failure = payload
            self.how_it_ended = self.how_it_ended or payload.summary()
        return self.returncode

    def wait(self, timeout=None):
        import ray

        ready, _ = ray.wait([self.future], timeout=timeout)
        if not ready:
            raise subprocess.TimeoutExpired("ray actor", timeout)
        return self.poll()

    def terminate(self):
        import ray

        # A worker that has returned, or returns within a moment, keeps its
        # outcome: killing its actor first would turn the failure it reports
        # (often the cause of its host's drop, while it leaves the job) into a
        # death without one. A Ray actor has no SIGTERM to end on.
        ray.wait([self.future], timeout=self.STOP_GRACE_SECONDS)
        if self.poll() is not None:
            return
        ray.kill(self.actor)

    kill = terminate


class RayLauncher:
    """Starts each worker as an ElasticWorker actor on its host."""

    def __init__(self, fn, executable, env_vars, cpus_per_worker, gpus_per_worker, queue,
                 nics=None):
        self.fn = fn
        self.nics = nics
        self.executable = executable
        self.env_vars = dict(env_vars or {})
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = gpus_per_worker
        self.queue = queue
        self.handles = []

    def start(self, name, host, slot, elastic_env):
        import ray

        env = {k: str(v) for k, v in self.env_vars.items()}
        env.update(elastic_env)
        # The rank reports its host as discovery names it, the name the
        # driver grouped ranks by (a node's IP, or a name of the user's).
        env["RINGLET_HOSTNAME"] = host
        env["PYTHONUNBUFFERED"] = "1"
        actor = ray.remote(ElasticWorker).options(
            num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
            resources={f"node:{host}": 0.01}).remote()
        handle = _WorkerHandle(actor, actor.run.remote(env, self.fn, self.executable, self.queue,
                                                         self.nics))
        self.handles.append(handle)
        return handle

    def listen_address(self, hosts):
        import ray

        return ray.util.get_node_ip_address()

    def close(self):
        import ray

        for handle in self.handles:
            ray.kill(handle.actor)


@contextlib.contextmanager
def _autoscaler_demand(max_workers, cpus_per_worker, gpus_per_worker):
    """Asks Ray's autoscaler for room for ``max_workers`` workers while the
    job runs (ray.autoscaler.sdk.request_resources), and for nothing after:
    the job starts actors only on slots that exist, so without this demand
    an autoscaling cluster would never add the nodes it could grow to."""
    if not max_workers:
        yield
        return
    from ray.autoscaler.sdk import request_resources

    bundle = {"CPU": cpus_per_worker}
    if gpus_per_worker:
        bundle["GPU"] = gpus_per_worker
    request_resources(bundles=[bundle] * max_workers)
    try:
        yield
    finally:
        request_resources(bundles=[])


def run_job(settings, discovery, fn, executable, env_vars, cpus_per_worker, gpus_per_worker,
            queue, nics=None):
    """Runs ``fn(executable)`` as an elastic job, ``executable`` being
    made in each worker from (executable_cls, args, kwargs); returns the values of the
    workers that finished, by rank, or raises RuntimeError saying why the
    job failed (from the failing worker's RankFailure where there is one)."""
    launcher = RayLauncher(fn, executable, env_vars, cpus_per_worker, gpus_per_worker, queue,
                           nics)
    driver = elastic_driver.Driver(settings, _Discover(discovery), launcher)
    with _autoscaler_demand(settings.max_np, cpus_per_worker, gpus_per_worker):
        code = driver.run()
    if code != 0:
        failures = [h.failure for h in launcher.handles if h.failure is not None]
        error = RuntimeError(f"the elastic Ray job failed: {driver.outcome}")
        if failures:
            raise error from first_cause(failures)
        raise error
    return [w.process.value for w in driver.finished_workers()]
