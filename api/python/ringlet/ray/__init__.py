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

With ``min_workers`` (and ``max_workers``), the job is elastic
(ringlet.ray.elastic): ``run``/``execute`` start a worker per slot Ray's
nodes hold, up to ``max_workers``, and the job re-forms as workers die and
nodes come and go. ``callbacks`` receive every value a worker sends with
``ringlet.ray.ray_logger.log``. ``ElasticRayExecutor`` is Horovod's earlier
elastic executor, over the same."""

import os
import socket

from ringlet.runner import elastic_driver, job
from ringlet.runner.elastic_hosts import check_cooldown_range
from ringlet.runner.failures import RankFailure, first_cause
from ringlet.ray import elastic
from ringlet.ray.callbacks import CallbackPump
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
        first by name carries Ringlet's links, all of them NCCL's sockets
        unless the ranks set NCCL_SOCKET_IFNAME). The ssh arguments are kept for Horovod's
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
        if max_workers is not None and (min_workers is None or min_workers <= 0):
            raise ValueError("max_workers needs a positive min_workers: an elastic job goes on "
                             "with at least min_workers workers")
        if min_workers is not None and (num_workers is not None or num_hosts is not None):
            raise ValueError("give min_workers (an elastic job) or num_workers/num_hosts (a job "
                             "of a fixed size), not both")
        self.settings = settings
        self.cpus_per_worker = cpus_per_worker
        self.use_gpu = use_gpu
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.workers = []  # by rank, once started
        self._placement_group = None
        self._own_placement_group = False
        self.elastic = None        # the elastic job's driver settings, where min_workers
        self._elastic_job = None   # its (executable, env vars), once started
        if min_workers is not None:
            if min_workers < 1:
                raise ValueError(f"min_workers must be at least 1, not {min_workers}")
            if max_workers is not None and max_workers < min_workers:
                raise ValueError(f"max_workers {max_workers} is below min_workers {min_workers}")
            if elastic_timeout is None:
                elastic_timeout = float(os.environ.get("HOROVOD_ELASTIC_TIMEOUT", "600"))
            self.elastic = elastic_driver.Settings(
                np=min_workers, min_np=min_workers, max_np=max_workers,
                elastic_timeout=elastic_timeout, reset_limit=reset_limit,
                cooldown_range=check_cooldown_range(cooldown_range))
            if override_discovery:
                self.discovery = elastic.RayDiscovery(use_gpu, cpus_per_worker,
                                                      gpus_per_worker)
            elif getattr(settings, "discovery", None) is None:
                raise ValueError("override_discovery=False needs settings.discovery, an object "
                                 "with find_available_hosts_and_slots()")
            else:
                self.discovery = settings.discovery
            return
        if num_workers is not None and num_hosts is not None:
            raise ValueError("give num_workers or num_hosts (with num_workers_per_host), "
                             "not both")
        if num_workers is None and num_hosts is None:
            raise ValueError("give num_workers, or num_hosts and num_workers_per_host")
        for name, value in (("num_workers", num_workers), ("num_hosts", num_hosts),
                            ("num_workers_per_host", num_workers_per_host)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        self.num_workers = num_workers
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host
        self.use_current_placement_group = use_current_placement_group

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Starts the workers, makes each a rank of one job (its environment
        set as ringletrun sets a rank's), and creates ``executable_cls(*args,
        **kwargs)`` in each, the object ``execute`` passes to its function."""
        import ray

        if self.elastic is not None:
            # An elastic job's workers start with each run/execute.
            self._elastic_job = ((executable_cls, list(executable_args or []),
                                  dict(executable_kwargs or {})), dict(extra_env_vars or {}))
            return
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
                env.update(job.rank_environment(placement, rendezvous, secret, job_id, timeout))
                calls.append(worker.become_rank.remote(placement.rank, env, nics))
            ray.get(calls)
            ray.get([w.start_executable.remote(executable_cls, executable_args, executable_kwargs)
                     for w in workers])
        except BaseException:
            self._release(ray, workers)
            raise
        self.workers = workers

    def execute(self, fn, callbacks=None):
        """``fn(executable)`` on every rank; the return values by rank.
        ``callbacks`` receive each value the ranks log (ray_logger.log)."""
        if self.elastic is not None:
            return self._run_elastic(fn, callbacks)
        return self._gather(lambda w, queue: w.execute_reported.remote(fn, queue), callbacks)

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """``fn(*args, **kwargs)`` on every rank; the return values by rank.
        ``callbacks`` receive each value the ranks log (ray_logger.log)."""
        call = _Call(fn, args, kwargs)
        if self.elastic is not None:
            return self._run_elastic(call, callbacks)
        return self._gather(lambda w, queue: w.execute_reported.remote(call, queue), callbacks)

    def run_remote(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every rank; their ObjectRefs by rank."""
        if self.elastic is not None:
            raise NotImplementedError("an elastic job's workers come and go: run_remote has no "
                                      "ObjectRefs to give; use run")
        call = _Call(fn, args, kwargs)
        return [w.execute.remote(call) for w in self._started()]

    def execute_single(self, fn):
        """``fn(executable)`` on rank 0 alone; its return value."""
        import ray

        if self.elastic is not None:
            raise NotImplementedError("an elastic job has no fixed rank 0 between calls: "
                                      "execute_single is not served there; use execute")
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

    def _run_elastic(self, fn, callbacks):
        if self._elastic_job is None:
            raise RuntimeError("this RayExecutor has not started: call start() first")
        executable, env_vars = self._elastic_job
        pump = CallbackPump(callbacks)
        try:
            return elastic.run_job(self.elastic, self.discovery, fn, executable, env_vars,
                                   self.cpus_per_worker, self.gpus_per_worker, pump.queue,
                                   getattr(self.settings, "nics", None))
        finally:
            pump.close()

    def _gather(self, call, callbacks):
        import ray

        pump = CallbackPump(callbacks)
        try:
            refs = [call(w, pump.queue) for w in self._started()]
            values = self._values_of(ray, refs)
        finally:
            pump.close()
        return values

    @staticmethod
    def _values_of(ray, refs):
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


class ElasticSettings(Settings):
    """What ``ElasticRayExecutor.create_settings`` returns: the job's
    limits, and ``discovery`` (set by the executor unless
    ``override_discovery=False``)."""

    def __init__(self, min_num_proc=1, max_num_proc=None, reset_limit=None,
                 elastic_timeout=600, timeout_s=30, ssh_identity_file=None, nics=None,
                 cooldown_range=None, discovery=None):
        super().__init__(timeout_s, ssh_identity_file, nics=nics)
        self.min_num_proc = min_num_proc
        self.max_num_proc = max_num_proc
        self.reset_limit = reset_limit
        self.elastic_timeout = elastic_timeout
        self.cooldown_range = cooldown_range
        self.discovery = discovery


class ElasticRayExecutor:
    """Horovod's earlier elastic executor on Ray (deprecated there since
    0.25 in favour of ``RayExecutor(min_workers=...)``, which this one
    runs): ``create_settings(min_num_proc, max_num_proc, ...)``,
    ``ElasticRayExecutor(settings, use_gpu, cpus_per_slot, gpus_per_slot,
    env_vars, override_discovery)``, ``start()``, ``run(worker_fn,
    callbacks)`` with ``worker_fn`` taking no arguments."""

    @staticmethod
    def create_settings(min_num_proc=1, max_num_proc=None, reset_limit=None,
                        elastic_timeout=600, timeout_s=30, ssh_identity_file=None, nics=None,
                        min_np=None, max_np=None, **kwargs):
        min_num_proc, max_num_proc = elastic_driver.sizes_renamed(min_num_proc, max_num_proc,
                                                                  min_np, max_np)
        return ElasticSettings(min_num_proc, max_num_proc, reset_limit, elastic_timeout,
                               timeout_s, ssh_identity_file, nics,
                               cooldown_range=kwargs.get("cooldown_range"))

    def __init__(self, settings, use_gpu=False, cpus_per_slot=1, gpus_per_slot=None,
                 env_vars=None, override_discovery=True):
        if gpus_per_slot and not use_gpu:
            raise ValueError("gpus_per_slot is set, but use_gpu is False: use_gpu must be True "
                             "where gpus_per_slot is set")
        self.executor = RayExecutor(
            settings, cpus_per_worker=cpus_per_slot, use_gpu=use_gpu,
            gpus_per_worker=gpus_per_slot, min_workers=settings.min_num_proc,
            max_workers=settings.max_num_proc, reset_limit=settings.reset_limit,
            cooldown_range=settings.cooldown_range, elastic_timeout=settings.elastic_timeout,
            override_discovery=override_discovery)
        self.env_vars = dict(env_vars or {})

    def start(self):
        self.executor.start(extra_env_vars=self.env_vars)

    def run(self, worker_fn, callbacks=None):
        """``worker_fn()`` on every worker of the elastic job; the values of
        the workers that finished, by rank."""
        return self.executor.run(worker_fn, callbacks=callbacks)
