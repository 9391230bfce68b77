"""TorchState: a PyTorch training's elastic state (Horovod's). Models,
optimizers and ElasticSamplers given as keyword arguments are saved as deep
copies of their state_dict and synchronized from rank 0
(broadcast_parameters, broadcast_optimizer_state, broadcast_object); every
other value is an ObjectState attribute, synchronized with broadcast_object."""

import copy

import torch

from ringlet.common.elastic import ObjectState
from ringlet.torch.elastic.sampler import ElasticSampler
from ringlet.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from ringlet.torch.mpi_ops import rank


class _StateDictHandler:
    """Saves and restores one object's state_dict (a model or an optimizer)."""

    def __init__(self, value):
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def set_value(self, value):
        self.value = value
        self.save()


class _ModelHandler(_StateDictHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_StateDictHandler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class _SamplerHandler(_StateDictHandler):
    def sync(self):
        # Rank 0's progress through the epoch, split anew among this world.
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))


def _handler_for(value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(value)
    return None


class TorchState(ObjectState):
    """``TorchState(model, optimizer, **kwargs)``: every model and optimizer
    among the arguments is handled by its state_dict, the rest (epoch,
    batch, ...) as plain attributes."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is None:
                plain[name] = value
            else:
                handlers[name] = handler
        object.__setattr__(self, "_handlers", handlers)
        for name, handler in handlers.items():
            object.__setattr__(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **plain)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def __setattr__(self, name, value):
        # A model or optimizer replaced by the user is the one saved from now on.
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)
