"""The Ray actor that is one rank of a RayExecutor's job. Its process keeps
the rank's environment and, once a function called ``hvd.init()``, its
Ringlet runtime, from one ``run`` to the next, as Horovod's Ray workers do."""

import os

from ringlet.runner import job
from ringlet.runner.failures import failure_of


class RankWorker:
    def __init__(self):
        self.rank = None
        self.executable = None

    def node(self):
        """(Ray node id, node IP): the id groups ranks by host; the IP is
        where the other ranks reach this one."""
        import ray

        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()

    def offer_rendezvous(self, address, nics):
        """host:port for the job's store, on this (rank 0's) host."""
        return job.rendezvous_address(address, nics)

    def become_rank(self, rank, env, nics=None):
        self.rank = rank
        for name in [n for n in os.environ if n not in job.without_job(os.environ)]:
            del os.environ[name]
        os.environ.update(env)
        os.environ.update(job.interface_environment(nics, os.environ))

    def env_vars(self):
        return dict(os.environ)

    def start_executable(self, executable_cls, args, kwargs):
        if executable_cls is not None:
            self.executable = executable_cls(*(args or []), **(kwargs or {}))

    def execute(self, fn):
        """fn(executable), raised as it raises (for ObjectRefs the caller gets)."""
        try:
            return fn(self.executable)
        except Exception:
            leave_job()
            raise

    def execute_reported(self, fn, queue=None):
        """fn(executable) as (True, value), or (False, RankFailure) where it
        raised, so that the driver can pick the failure that came first.
        What it logs (ray_logger.log) goes to ``queue``, the driver's
        callbacks."""
        from ringlet.ray import ray_logger

        ray_logger.configure(queue)
        try:
            return True, fn(self.executable)
        except Exception as e:
            leave_job()
            return False, failure_of(self.rank, e)
        finally:
            ray_logger.configure(None)


def leave_job():
    """Shuts Ringlet down on a rank whose function failed, as the end of its
    process would: the other ranks' collectives then fail at once, naming
    it, instead of waiting for a tensor this rank will never send."""
    from ringlet.common import basics

    if basics.is_initialized():
        basics.shutdown()
