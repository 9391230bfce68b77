"""Helpers that start training from the same state on every rank, and move
Python objects between ranks."""

import io
import pickle

import torch

from ringlet import _ringlet
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.torch.mpi_ops import allgather, broadcast_, broadcast_async_, synchronize


def broadcast_parameters(params, root_rank, prefix=None):
    """Overwrites every rank's parameters with ``root_rank``'s.

    ``params`` is a ``state_dict()`` or ``named_parameters()`` (a list of
    (name, tensor) pairs). Entries that are not tensors are left alone.
    """
    if isinstance(params, dict):
        items = sorted(params.items())
    elif hasattr(params, "__iter__"):
        items = list(params)
        for item in items:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ValueError("broadcast_parameters takes a state_dict or a list of "
                                 "(name, tensor) pairs such as model.named_parameters()")
    else:
        raise ValueError(f"broadcast_parameters: invalid params of type {type(params)}")
    prefix = prefix or ""
    handles = []
    for name, p in items:
        if isinstance(p, torch.Tensor):
            target = p.data if isinstance(p, torch.nn.Parameter) else p
            handles.append(broadcast_async_(target, root_rank, name=f"{prefix}{name}"))
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank, prefix="Parameter."):
    """Overwrites every rank's optimizer state and hyperparameters with ``root_rank``'s.

    Ranks whose optimizer has not stepped yet (no state) receive the root's
    state all the same, so that momentum buffers start equal.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state does not support LBFGS")
    state = broadcast_object(optimizer.state_dict() if _ringlet.rank() == root_rank else None,
                             root_rank, name=f"{prefix}optimizer_state")
    optimizer.load_state_dict(state)


def _to_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _from_bytes(tensor):
    return torch.load(io.BytesIO(tensor.numpy().tobytes()), weights_only=False)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """``root_rank``'s ``obj`` (anything picklable) on every rank of ``process_set``."""
    name = name or "broadcast_object"  # the same on every rank, whatever obj is there
    if _ringlet.rank() == root_rank:
        payload = _to_bytes(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        payload = None
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name=f"{name}.size", process_set=process_set)
    if payload is None:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name=f"{name}.data", process_set=process_set)
    return obj if _ringlet.rank() == root_rank else _from_bytes(payload)


def allgather_object(obj, name=None, process_set=global_process_set):
    """The list of every member's ``obj`` (anything picklable), in rank order."""
    name = name or "allgather_object"
    payload = _to_bytes(obj)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64),
                        name=f"{name}.sizes", process_set=process_set)
    gathered = allgather(payload, name=f"{name}.data", process_set=process_set)
    members = _ringlet.process_set_size(_set_id(process_set))
    out, offset = [], 0
    for i in range(members):
        n = int(lengths[i])
        out.append(_from_bytes(gathered[offset:offset + n]))
        offset += n
    return out
