"""Elastic Ringlet jobs inside PySpark: ``ringlet.spark.run_elastic``, as
``horovod.spark.run_elastic`` runs them.

The elastic driver (ringlet.runner.elastic_driver) runs here, in the Spark
driver's process. The Spark job has ``max_num_proc`` tasks (not in barrier
mode: they come and go one by one); each registers with the driver's task
registry and is a host of one slot, each attempt of a task a host of its
own, as Horovod makes them, so that a failed task (a host the job drops)
comes back as a new host once Spark runs it again. The driver starts a
worker on a task by sending it the worker's environment; the task runs
``fn`` in a rank process of its own (ringlet.runner.rank_process), which
re-forms with the others as workers come and go (``hvd.elastic.run``).

A task whose rank failed fails, so that Spark runs it again (within
``spark.task.maxFailures``; ``local[N,F]`` allows F in local mode); a task
the driver stops, or never needed, ends with no value. The job's value is
what the workers that finished returned, by their rank in its last round;
it travels back through Spark, not the registry. The registry's messages
carry an HMAC under the driver's key (ringlet.runner.elastic_wire), which
the tasks receive with their closure, as the job's secret reaches a
``ringlet.spark.run`` task: enable Spark's RPC encryption where the network
is not trusted."""

import os
import secrets
import socket
import subprocess
import threading

from ringlet.runner import elastic_driver, elastic_wire, job
from ringlet.runner.rank_process import run_rank

# How much of a failed rank's report, or of one line of a rank's output,
# crosses the registry (its messages are at most 1 MiB).
_REPORT_LIMIT = 64 * 1024


class TaskLink:
    """The driver's side of one registered task; to the driver, the handle
    of the worker it runs (poll, returncode, wait, terminate, kill)."""

    def __init__(self, connection, index, attempt, host):
        self.connection = connection
        self.index = index
        self.attempt = attempt
        self.host = host
        self.started = False
        self.returncode = None
        self.how_it_ended = None
        self.ended = threading.Event()
        self.send_lock = threading.Lock()
        self.killed = False         # the driver closed the connection itself

    def send(self, message):
        with self.send_lock:
            self.connection.send(message)

    def end(self, returncode, how=None):
        if self.returncode is None:
            self.returncode, self.how_it_ended = returncode, how
        self.ended.set()

    # -- the worker handle --

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self.ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"Spark task {self.index}", timeout)
        return self.returncode

    def terminate(self):
        try:
            self.send({"op": "stop"})
        except (OSError, elastic_wire.WireError):
            self.end(1, "its Spark task was lost")

    def kill(self):
        # Closing the connection is a stop the task cannot miss: it ends its
        # rank when its driver is gone.
        self.killed = True
        self.connection.close()


class TaskRegistry:
    """Where the Spark tasks register; the driver's discovery (each task a
    host of one slot) and launcher (a worker starts on a task)."""

    def __init__(self, key, address, env, stdout=None, stderr=None):
        self.key = key
        self.env = env              # the user's variables for every rank
        self.streams = {"stdout": stdout, "stderr": stderr}  # the ranks' lines, where given
        self.print_lock = threading.Lock()  # whole lines, one task's at a time
        self.lock = threading.Lock()
        self.links = {}             # host -> TaskLink
        self.failures = []          # (second_hand, report) of failed ranks, as they came
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind((address, 0))
        self.listener.listen(64)
        self.address = f"{address}:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, name="ringlet-spark-registry", daemon=True).start()

    def _accept(self):
        while True:
            try:
                sock, peer = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock, peer[0]), daemon=True).start()

    def _serve(self, sock, peer):
        link = None
        try:
            sock.settimeout(30)  # a task registers at once; a stranger is not waited for
            connection = elastic_wire.accept(sock, self.key)
            hello = connection.receive()
            if hello.get("op") != "register":
                raise elastic_wire.WireError(f"a task began with {hello.get('op')!r}")
            sock.settimeout(None)  # then it may wait as long as the job runs
            index, attempt = int(hello["task"]), int(hello["attempt"])
            link = TaskLink(connection, index, attempt,
                            f"{hello['host']}-task{index}.{attempt}")
            with self.lock:
                self.links[link.host] = link
            while True:
                message = connection.receive()
                if message.get("op") == "output":
                    self._print(link, message.get("kind"), str(message.get("line", "")))
                elif message.get("op") == "ended":
                    link.end(0 if message.get("ok") else 1, message.get("how"))
                    if message.get("report"):
                        with self.lock:
                            self.failures.append((bool(message.get("second_hand")),
                                                  message["report"]))
        except (OSError, elastic_wire.ConnectionClosed):
            pass
        except (elastic_wire.WireError, ValueError, KeyError) as e:
            # Not one of the job's tasks, or one that broke the protocol
            # (unless the driver closed the connection under this reader).
            if link is None or not link.killed:
                elastic_driver.log(f"refused the connection from {peer}"
                                   + (f" (task {link.host})" if link is not None else "")
                                   + f": {e}")
        finally:
            if link is not None:
                link.end(1, "its Spark task was lost (its executor died or Spark ended it)")
            sock.close()

    def _print(self, link, kind, line):
        stream = self.streams.get(kind)
        if stream is not None:
            with self.print_lock:
                stream.write(f"[{link.host}:0]<{kind}>:{line}\n")
                stream.flush()

    # -- discovery --

    def discover(self):
        """{host: 1} for each task that is waiting for a worker, runs one,
        or finished one; not those that failed or were lost."""
        with self.lock:
            return {h: 1 for h, link in self.links.items()
                    if link.returncode is None or (link.returncode == 0 and link.started)}

    # -- launcher --

    def start(self, name, host, slot, elastic_env):
        with self.lock:
            link = self.links[host]
        env = dict(self.env)
        env.update(elastic_env)
        env.pop("RINGLET_ELASTIC_KEY")  # the task has it; it never crosses the network
        env["RINGLET_HOSTNAME"] = host
        link.started = True
        try:
            link.send({"op": "start", "env": env})
        except (OSError, elastic_wire.WireError):
            link.end(1, "its Spark task was lost before the worker started")
        return link

    def listen_address(self, hosts):
        return self.address.rsplit(":", 1)[0]

    def close(self):
        """Stops every task still waiting or running, and stops registering."""
        self.listener.close()
        with self.lock:
            links = list(self.links.values())
        for link in links:
            if not link.ended.is_set():
                link.terminate()

    def link_of(self, host):
        with self.lock:
            return self.links[host]


class ElasticTask:
    """What each Spark task runs (pickled to the executors)."""

    def __init__(self, fn, args, kwargs, key, registry, capture_output, nics=None):
        self.fn = fn
        self.nics = nics
        self.args = args
        self.kwargs = kwargs
        self.key = key
        self.registry = registry
        self.capture_output = capture_output

    def __call__(self, index, _partition):
        from pyspark import TaskContext

        attempt = TaskContext.get().attemptNumber()
        connection = elastic_wire.connect(self.registry, self.key, timeout=30)
        _keep_alive(connection.sock)
        connection.sock.settimeout(None)  # a spare task waits as long as the job runs
        connection.send({"op": "register", "task": index, "attempt": attempt,
                         "host": socket.gethostname()})
        try:
            order = connection.receive()
        except (OSError, elastic_wire.WireError):
            order = {"op": "stop"}
        if order.get("op") != "start":
            connection.close()
            yield (index, attempt, False, None)
            return

        env = job.without_job(os.environ)
        env.update(order["env"])
        env.update(job.interface_environment(self.nics, env))
        env["RINGLET_ELASTIC_KEY"] = self.key.hex()
        rank = _Rank()
        threading.Thread(target=rank.stop_on_order, args=(connection,), daemon=True).start()
        host = env["RINGLET_HOSTNAME"]
        sending = threading.Lock()  # the rank's lines and the end share the connection

        def send(message):
            with sending:
                connection.send(message)

        def forward(kind, line):
            try:
                send({"op": "output", "kind": kind, "line": line[:_REPORT_LIMIT]})
            except (OSError, elastic_wire.WireError):
                pass  # the driver is gone; the rank is stopped by the order thread

        ended = run_rank(host, self.fn, self.args, self.kwargs, env,
                         capture_output=self.capture_output, on_start=rank.started,
                         on_line=forward)
        stopped = rank.stopped  # before closing the connection ends its reader
        failed = ended.failure is not None and not stopped
        report = None
        if failed:
            report = f"worker {host} failed: {ended.failure.detail}"
            if ended.stderr:
                report += "\n-- its stderr, last lines --\n" + "\n".join(
                    ended.stderr.splitlines()[-20:])
        try:
            send({"op": "ended", "ok": not failed,
                  "how": ended.failure.summary() if failed else None,
                  "second_hand": failed and ended.failure.second_hand,
                  "report": report[-_REPORT_LIMIT:] if report else None})
        except (OSError, elastic_wire.WireError):
            pass
        connection.close()
        if failed:
            # Failing the task has Spark run it again: a new host for the job.
            raise RuntimeError(report)
        yield (index, attempt, not stopped, ended.value)


class _Rank:
    """A task's rank process, and the driver's order to stop it."""

    def __init__(self):
        self.process = None
        self.stopped = False
        self.lock = threading.Lock()

    def started(self, process):
        with self.lock:
            self.process = process
            if self.stopped:
                process.terminate()

    def stop_on_order(self, connection):
        try:
            while connection.receive().get("op") != "stop":
                pass
        except (OSError, elastic_wire.WireError):
            pass  # the driver is gone: its rank cannot go on either
        with self.lock:
            self.stopped = True
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()


def _keep_alive(sock):
    """TCP keepalive on a task's connection: a driver whose host vanished
    is noticed within about a minute, not never."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def registry_address(spark_context, nics):
    """Where the tasks reach the driver: the chosen one of ``nics``, else
    Spark's driver host (loopback in local mode)."""
    if nics:
        return job.interface_address(job.chosen_interface(nics))
    master = spark_context.master or ""
    if master.startswith("local"):
        return "127.0.0.1"
    host = spark_context.getConf().get("spark.driver.host", socket.gethostname())
    return socket.gethostbyname(host)


def run_job(spark_context, group, fn, args, kwargs, settings, env, nics, stdout, stderr,
            num_tasks):
    """Runs the elastic job; returns the values of the workers that
    finished, by rank, or raises RuntimeError saying why it failed. Where
    ``stdout``/``stderr`` are given, each worker's lines reach them as they
    come, prefixed ``[worker]<stdout>:``."""
    key = secrets.token_bytes(32)
    registry = TaskRegistry(key, registry_address(spark_context, nics), env, stdout, stderr)
    driver = elastic_driver.Driver(settings, registry.discover, registry, key=key)
    task = ElasticTask(fn, tuple(args), dict(kwargs), driver.key, registry.address,
                       capture_output=stdout is not None or stderr is not None, nics=nics)
    collected, spark_error = {}, []

    def spark_job():
        spark_context.setJobGroup(group, f"ringlet.spark.run_elastic of up to {num_tasks} "
                                  f"ranks", interruptOnCancel=True)
        try:
            rows = spark_context.range(0, numSlices=num_tasks).mapPartitionsWithIndex(
                task).collect()
            collected.update({(r[0], r[1]): r[2:] for r in rows})
        except Exception as e:  # the driver ends the job with it
            spark_error.append(e)
            with driver.lock:
                driver.end(f"the Spark job failed: {str(e).splitlines()[0][:300]}")

    spark_thread = threading.Thread(target=spark_job, name="ringlet-spark-elastic-job",
                                    daemon=True)
    spark_thread.start()
    try:
        code = driver.run()
    finally:
        registry.close()
        spark_thread.join(60)
        if spark_thread.is_alive():
            spark_context.cancelJobGroup(group)
            spark_thread.join(30)
    if code != 0:
        message = f"the elastic Spark job failed: {driver.outcome}"
        # The first rank that failed first-hand (not for another's failure).
        first = sorted(registry.failures, key=lambda f: f[0])[:1]
        if first:
            message += f"\nthe first failure:\n{first[0][1]}"
        raise RuntimeError(message) from (spark_error[0] if spark_error else None)
    values = []
    for worker in driver.finished_workers():
        link = registry.link_of(worker.host)
        finished, value = collected.get((link.index, link.attempt), (False, None))
        if finished:
            values.append(value)
    return values
