"""ringlet.torch.elastic (``hvd.elastic``): Horovod's elastic training for
PyTorch. ``run`` wraps a training function so that it survives workers
leaving and joining (ringlet.common.elastic has the rules); ``TorchState``
holds what it trains, ``ElasticSampler`` where it is in an epoch."""

from ringlet.common.elastic import ObjectState, State, run_fn
from ringlet.torch.elastic.sampler import ElasticSampler
from ringlet.torch.elastic.state import TorchState


def run(func):
    """Decorates ``func(state, *args, **kwargs)``, whose first argument is a
    State: it runs on every worker and goes on through resets. Collectives
    belong inside it, not in the call that starts it."""
    return run_fn(func)


__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run"]
