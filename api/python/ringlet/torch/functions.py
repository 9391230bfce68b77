"""Helpers that start training from the same state on every rank, and move
Python objects between ranks."""

import cloudpickle
import torch

from ringlet import _ringlet
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.torch.mpi_ops import (Min, allgather, allreduce, broadcast_, broadcast_async_,
                                   synchronize)


def broadcast_parameters(params, root_rank, prefix=None):
    """Overwrites every rank's parameters with ``root_rank``'s.

    ``params`` is a ``state_dict()`` (broadcast in the order of its sorted
    names), a list of (name, tensor) pairs such as
    ``list(model.named_parameters())``, or a list of tensors such as
    ``list(model.parameters())``. An entry that is not a tensor is refused
    (``ValueError``) before anything is broadcast.
    """
    if isinstance(params, dict):
        items = sorted(params.items())
    elif hasattr(params, "__iter__"):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
        for item in items:
            if len(item) != 2:
                raise ValueError("broadcast_parameters takes a state_dict, a list of tensors "
                                 "or a list of (name, tensor) pairs such as "
                                 "model.named_parameters()")
    else:
        raise ValueError(f"broadcast_parameters: invalid params of type {type(params)}")
    for i, (name, p) in enumerate(items):
        if not isinstance(p, torch.Tensor):
            entry = repr(name) if name is not None else f"at index {i}"
            raise ValueError(f"broadcast_parameters on rank {_ringlet.rank()}: the entry "
                             f"{entry} ({type(p).__name__}) is not a tensor; pass tensors only")
    prefix = prefix or ""
    handles = []
    for name, p in items:
        target = p.data if isinstance(p, torch.nn.Parameter) else p
        handles.append(broadcast_async_(target, root_rank,
                                        name=None if name is None else f"{prefix}{name}"))
    for handle in handles:
        synchronize(handle)


def _initialize_state(optimizer, model):
    """Horovod's first step of an optimizer without state: a zero gradient for every
    parameter that requires one (sparse where the optimizer takes sparse ones) and one
    step of the wrapped optimizer, never the distributed one's."""
    from ringlet.torch.optimizer import _DistributedOptimizer
    sparse = set()
    if model is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding) and module.sparse:
                sparse.update(id(p) for p in module.parameters())
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p.data, memory_format=torch.contiguous_format)
                if isinstance(optimizer, torch.optim.SparseAdam) or (
                        isinstance(optimizer, torch.optim.SGD) and id(p) in sparse):
                    p.grad = p.grad.to_sparse()
    if isinstance(optimizer, _DistributedOptimizer):
        super(_DistributedOptimizer, optimizer).step()
    else:
        optimizer.step()


def _describe_state(optimizer, params):
    """What the root sends first: the hyperparameters, and per parameter index its state,
    tensors as (shape, dtype, whether on the parameter's device) and the rest as values."""
    state = {}
    for i, p in enumerate(params):
        if not optimizer.state.get(p):
            continue
        entry = {}
        for key, value in optimizer.state[p].items():
            if isinstance(value, torch.Tensor) and value.layout == torch.strided:
                entry[key] = ("tensor", tuple(value.shape), value.dtype, value.device == p.device)
            else:
                entry[key] = ("value", value)
        state[i] = entry
    groups = [{k: v for k, v in group.items() if k != "params"}
              for group in optimizer.param_groups]
    sizes = [len(group["params"]) for group in optimizer.param_groups]
    return {"param_groups": groups, "sizes": sizes, "state": state}


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Overwrites every rank's optimizer state and hyperparameters with ``root_rank``'s.

    As in Horovod, an optimizer without any state first takes one step with
    zero gradients (which sets ``p.grad`` to zeros and creates its state;
    ``model`` names the sparse embeddings whose gradients must be sparse for
    SGD); then every rank receives the root's state, whatever each had
    stepped before: the root's tensors (broadcast in place where the shapes
    agree), its other values and its hyperparameters, and no state for the
    parameters that have none on the root.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state cannot broadcast torch.optim.LBFGS's state "
                         "(its structure is nested and holds None values)")
    if not optimizer.state_dict()["state"]:
        _initialize_state(optimizer, model)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    root = broadcast_object(_describe_state(optimizer, params) if _ringlet.rank() == root_rank
                            else None, root_rank, name="broadcast_optimizer_state")
    sizes = [len(group["params"]) for group in optimizer.param_groups]
    agree = torch.tensor([int(sizes == root["sizes"])], dtype=torch.int32)
    if not allreduce(agree, op=Min, name="broadcast_optimizer_state.agree").item():
        raise ValueError(f"broadcast_optimizer_state: the optimizers differ between the ranks "
                         f"(parameters per group: {sizes} on rank {_ringlet.rank()}, "
                         f"{root['sizes']} on the root, rank {root_rank})")

    handles, received = [], {}
    is_root = _ringlet.rank() == root_rank
    for i, entry in sorted(root["state"].items()):
        p, own = params[i], optimizer.state.get(params[i], {})
        received[i] = {}
        for key, description in entry.items():
            if description[0] == "value":
                received[i][key] = description[1]
                continue
            _, shape, dtype, on_param_device = description
            device = p.device if on_param_device else torch.device("cpu")
            tensor = own.get(key)
            if is_root:
                # The root keeps its tensor and sends its values, in a contiguous
                # copy where its layout is another (a channels_last parameter's state).
                sent = tensor.contiguous()
            elif not (isinstance(tensor, torch.Tensor) and tuple(tensor.shape) == shape
                      and tensor.dtype == dtype and tensor.device == device
                      and tensor.is_contiguous()):
                sent = tensor = torch.empty(shape, dtype=dtype, device=device)
            else:
                sent = tensor
            received[i][key] = tensor
            handles.append(broadcast_async_(sent, root_rank,
                                            name=f"broadcast_optimizer_state.{i}.{key}"))
    for handle in handles:
        synchronize(handle)

    for i, p in enumerate(params):
        if i in received:
            optimizer.state[p] = received[i]
        else:
            optimizer.state.pop(p, None)
    for group, options in zip(optimizer.param_groups, root["param_groups"]):
        group.update(options)


def _to_bytes(obj):
    # cloudpickle, as Horovod: lambdas and local classes cross too.
    return torch.frombuffer(bytearray(cloudpickle.dumps(obj)), dtype=torch.uint8)


def _from_bytes(tensor):
    return cloudpickle.loads(tensor.numpy().tobytes())


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
