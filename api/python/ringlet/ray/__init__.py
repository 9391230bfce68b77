"""Ringlet jobs on a Ray cluster, as ``horovod.ray.RayExecutor`` runs them.

``RayExecutor(settings, num_workers=...)`` starts one Ray actor per rank in
a placement group (``PACK``; with ``num_hosts``, one bundle of
``num_workers_per_host`` workers per host, ``STRICT_SPREAD``), ranks keeping
each Ray node's actors together; rank 0's actor serves the rendezvous store
on its node's IP. ``run``/``execute`` call a function on every rank and
return the results by rank; where ranks fail, the exception raised is the
failure of the lowest rank that failed first-hand (not one that failed
because another rank did), a ``RankFailure`` naming that rank and holding
its traceback.

Not served yet: elastic jobs (``min_workers``/``max_workers``, the
``ElasticRayExecutor``) and ``callbacks`` (values logged by rank 0)."""

import socket

from ringlet.runner import job
from ringlet.runner.failures import RankFailure, first_cause
from ringlet.ray.worker import RankWorker


class Settings:
    """What ``RayExecutor.create_settings`` returns: the job's settings."""

    def __init__(self, timeout_s=30, ssh_identity_file=None, placement_group_timeout_s=100,
                 nics=None):
        self.timeout_s = timeout_s
        self.ssh_identity_file = ssh_identity_file
        self.placement_group_timeout_s = placement_group_timeout_s
        self.nics = nics


class RayExecutor:
    """A Ringlet job on Ray: ``start()``, then ``run``/``execute`` as often
    as needed, then ``shutdown()``."""

    @classmethod
    def create_settings(cls, timeout_s=30, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        """Settings for ``RayExecutor``: ``timeout_s`` bounds the ranks'
        rendezvous, ``placement_group_timeout_s`` the wait for Ray's
        resources, ``nics`` names the interfaces the job may use (the
        first by name is used). The ssh arguments are kept for Horovod's
        signature (Ray, not ssh, starts the ranks); ``ssh_str`` is written to
        ``ssh_identity_file`` (mode 0600) where that file does not exist."""
        import os

        if ssh_str and ssh_identity_file and not os.path.exists(ssh_identity_file):
            fd = os.open(ssh_identity_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with open(fd, "w") as f:
                f.write(ssh_str)
        return Settings(timeout_s, ssh_identity_file, placement_group_timeout_s, nics)

    def __init__(self, settings, num_workers=None, num_hosts=None, num_workers_per_host=1,
                 cpus_per_worker=1, use_gpu=False, gpus_per_worker=None,
                 use_current_placement_group=True, min_workers=None, max_workers=None,
                 reset_limit=None, cooldown_range=None, elastic_timeout=600,
                 override_discovery=True):
        if min_workers is not None or max_workers is not None:
            raise ValueError("elastic Ray jobs (min_workers/max_workers) are not served yet; "
                             "give num_workers, or num_hosts and num_workers_per_host")
        if num_workers is not None and num_hosts is not None:
            raise ValueError("give num_workers or num_hosts (with num_workers_per_host), "
                             "not both")
        if num_workers is None and num_hosts is None:
            raise ValueError("give num_workers, or num_hosts and num_workers_per_host")
        for name, value in (("num_workers", num_workers), ("num_hosts", num_hosts),
                            ("num_workers_per_host", num_workers_per_host)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        self.settings = settings
        self.num_workers = num_workers
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host
        self.cpus_per_worker = cpus_per_worker
        self.use_gpu = use_gpu
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.use_current_placement_group = use_current_placement_group
        self.workers = []  # by rank, once started
        self._placement_group = None
        self._own_placement_group = False

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Starts the workers, makes each a rank of one job (its environment
        set as ringletrun sets a rank's), and creates ``executable_cls(*args,
        **kwargs)`` in each, the object ``execute`` passes to its function."""
        import ray

        if self.workers:
            raise RuntimeError("this RayExecutor has started already; shutdown() first")
        workers = self._create_workers(ray)
        try:
            nodes = ray.get([w.node.remote() for w in workers])
            placements = job.place_workers([node_id for node_id, _ in nodes])
            by_rank = sorted(range(len(workers)), key=lambda i: placements[i].rank)
            workers = [workers[i] for i in by_rank]
            placements = [placements[i] for i in by_rank]
            rank0_ip = nodes[by_rank[0]][1]
            nics = getattr(self.settings, "nics", None)
            rendezvous = ray.get(workers[0].offer_rendezvous.remote(rank0_ip, nics))
            secret, job_id = job.new_secret(), job.new_job_id()
            timeout = getattr(self.settings, "timeout_s", None)
            calls = []
            for worker, placement in zip(workers, placements):
                env = dict(extra_env_vars or {})
                env.update(job.rank_environment(placement, rendezvous, secret, job_id, timeout,
                                                nics))
                calls.append(worker.become_rank.remote(placement.rank, env))
            ray.get(calls)
            ray.get([w.start_executable.remote(executable_cls, executable_args, executable_kwargs)
                     for w in workers])
        except BaseException:
            self._release(ray, workers)
            raise
        self.workers = workers

    def execute(self, fn, callbacks=None):
        """``fn(executable)`` on every rank; the return values by rank."""
        self._refuse_callbacks(callbacks)
        return self._gather([w.execute_reported.remote(fn) for w in self._started()])

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """``fn(*args, **kwargs)`` on every rank; the return values by rank."""
        self._refuse_callbacks(callbacks)
        call = _Call(fn, args, kwargs)
        return self._gather([w.execute_reported.remote(call) for w in self._started()])

    def run_remote(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every rank; their ObjectRefs by rank."""
        call = _Call(fn, args, kwargs)
        return [w.execute.remote(call) for w in self._started()]

    def execute_single(self, fn):
        """``fn(executable)`` on rank 0 alone; its return value."""
        import ray

        return ray.get(self._started()[0].execute.remote(fn))

    def shutdown(self):
        """Ends every worker (and its rank) and frees the placement group."""
        import ray

        self._release(ray, self.workers)
        self.workers = []

    # -- inside --

    def _started(self):
        if not self.workers:
            raise RuntimeError("this RayExecutor has not started: call start() first")
        return self.workers

    @staticmethod
    def _refuse_callbacks(callbacks):
        if callbacks:
            raise ValueError("callbacks (values logged by rank 0) are not served yet")

    def _gather(self, refs):
        import ray

        values, failures = [], []
        for rank, ref in enumerate(refs):
            try:
                ok, value = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                ok, value = False, RankFailure(rank, f"its Ray actor died: {e}")
            if ok:
                values.append(value)
            else:
                failures.append(value)
        if failures:
            raise first_cause(failures)
        return values

    def _create_workers(self, ray):
        from ray.util.placement_group import (get_current_placement_group,
                                              placement_group)
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        per_worker = {"CPU": self.cpus_per_worker}
        if self.gpus_per_worker:
            per_worker["GPU"] = self.gpus_per_worker
        current = get_current_placement_group() if self.use_current_placement_group else None
        if current is not None and self.num_hosts is None:
            group, bundles = current, [-1] * self.num_workers
        elif self.num_hosts is not None:
            per_host = {k: v * self.num_workers_per_host for k, v in per_worker.items()}
            group = placement_group([per_host] * self.num_hosts, strategy="STRICT_SPREAD")
            bundles = [h for h in range(self.num_hosts) for _ in range(self.num_workers_per_host)]
            self._own_placement_group = True
        else:
            group = placement_group([per_worker] * self.num_workers, strategy="PACK")
            bundles = list(range(self.num_workers))
            self._own_placement_group = True
        self._placement_group = group
        timeout = getattr(self.settings, "placement_group_timeout_s", 100)
        ready, _ = ray.wait([group.ready()], timeout=timeout)
        if not ready:
            self._release(ray, [])
            raise TimeoutError(
                f"Ray did not grant the placement group of {len(bundles)} workers "
                f"({per_worker} each) within {timeout} s; the cluster lacks the resources "
                f"(ray.available_resources() on {socket.gethostname()}: "
                f"{ray.available_resources()})")
        actor = ray.remote(RankWorker)
        return [actor.options(num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                              scheduling_strategy=PlacementGroupSchedulingStrategy(
                                  placement_group=group, placement_group_bundle_index=b)).remote()
                for b in bundles]

    def _release(self, ray, workers):
        from ray.util.placement_group import remove_placement_group

        for worker in workers:
            ray.kill(worker)
        if self._placement_group is not None and self._own_placement_group:
            remove_placement_group(self._placement_group)
        self._placement_group = None
        self._own_placement_group = False


class _Call:
    """``fn(*args, **kwargs)`` in the form ``execute`` takes (a function of
    the executable)."""

    def __init__(self, fn, args, kwargs):
        self.fn = fn
        self.args = list(args or [])
        self.kwargs = dict(kwargs or {})

    def __call__(self, _executable):
        return self.fn(*self.args, **self.kwargs)
