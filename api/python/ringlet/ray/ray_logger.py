"""Values a worker sends to the driver's callbacks, as
``horovod.ray.ray_logger``: ``log(info)`` in a function that
``RayExecutor.run``/``execute`` runs with ``callbacks=[...]`` hands
``info`` (any picklable value, a dict by custom) to every callback, in the
driver, in the order each worker logged."""

import warnings

_queue = None
_warned = False


def configure(queue):
    """Sends this worker's logged values to ``queue`` (a ray.util.queue.Queue),
    or nowhere where None."""
    global _queue
    _queue = queue


def log(info):
    """Sends ``info`` to the driver's callbacks."""
    global _warned
    if _queue is not None:
        _queue.put(info)
    elif not _warned:
        warnings.warn("ray_logger.log was called where no callbacks were given: the value "
                      "goes nowhere")
        _warned = True
