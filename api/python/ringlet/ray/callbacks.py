"""The driver's side of ``callbacks=[...]``: the workers' logged values
(ringlet.ray.ray_logger) reach the driver through a Ray queue, and a thread
here hands each to every callback. A callback that raises ends the pumping;
its exception is raised by close(), when the call's results are in."""

import threading


class CallbackPump:
    def __init__(self, callbacks):
        self.callbacks = list(callbacks or [])
        self.queue = None
        self.error = None
        if not self.callbacks:
            return
        for c in self.callbacks:
            if not callable(c):
                raise TypeError(f"a callback must be callable, not {c!r}")
        from ray.util.queue import Queue

        self.queue = Queue(actor_options={"num_cpus": 0})
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._pump, name="ringlet-ray-callbacks",
                                       daemon=True)
        self.thread.start()

    def _pump(self):
        from ray.util.queue import Empty

        while True:
            try:
                info = self.queue.get(block=True, timeout=0.2)
            except Empty:
                if self.stopping.is_set():
                    return  # every value logged before the call ended was handled
                continue
            try:
                for c in self.callbacks:
                    c(info)
            except Exception as e:  # raised by close(), in the caller's thread
                self.error = e
                return

    def close(self):
        """Handles what is left in the queue, ends the thread and the queue,
        and raises a callback's exception, if one raised."""
        if self.queue is None:
            return
        self.stopping.set()
        self.thread.join(60)
        self.queue.shutdown()
        if self.error is not None:
            raise self.error
