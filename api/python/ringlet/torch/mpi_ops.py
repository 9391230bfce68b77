"""horovod.torch's collectives on torch tensors, over Ringlet's runtime.

Every collective is named; the same name on every rank is the same
collective. The ``*_async`` forms return an integer handle at once, and
``synchronize(handle)`` waits and returns the result; ``poll(handle)`` says
whether it would wait. The forms without a trailing underscore leave their
input alone and (when not async) are differentiable with Horovod's gradient
rules; the forms with one work in place.
"""

import torch

from ringlet import _ringlet
from ringlet.common import basics as _basics
from ringlet.common.basics import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from ringlet.common import handles as _handles
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.torch.compression import Compression


# The dtypes the core reduces; the others (bool, complex, ...) are carried as
# bytes by the collectives that only move data.
_REDUCIBLE = {torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
              torch.uint8, torch.int16, torch.uint16, torch.int32, torch.int64}

_op_name = _handles.op_name
_register = _handles.register
poll = _handles.poll
synchronize = _handles.synchronize


def _stream_of(tensor):
    if tensor.is_cuda:
        return torch.cuda.current_stream(tensor.device).cuda_stream
    return 0


def _dense(tensor, call):
    """The tensor as the core takes it: without autograd, and refused if not contiguous."""
    if tensor.layout != torch.strided:
        raise ValueError(f"{call}: {tensor.layout} tensors are not supported; pass a dense "
                         f"tensor (tensor.to_dense())")
    return tensor.detach()


def _as_rows_of_bytes(tensor):
    """A tensor of a dtype the core does not reduce, as uint8 rows (dim 0 kept)."""
    rows = tensor.reshape(tensor.shape[0] if tensor.dim() > 0 else 1, -1)
    return rows.view(torch.uint8) if rows.numel() else rows.new_empty(rows.shape[0], 0,
                                                                      dtype=torch.uint8)


def _from_bytes(data, shape, dtype):
    """The result bytes of a collective as a tensor of `dtype` and `shape` (no copy).

    ``data`` is a numpy byte array for a host output, and a uint8 tensor on
    the device for a device output.
    """
    flat = data if isinstance(data, torch.Tensor) else torch.from_numpy(data)
    if dtype != torch.uint8:
        flat = flat.view(dtype)
    return flat.reshape(shape)


# ---------------------------------------------------------------- allreduce

def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set):
    core_op = _basics.core_op(op)
    full_name = _op_name("allreduce", name, process_set)
    src = _dense(tensor, "allreduce")
    dst = _dense(output, "allreduce")
    handle = _ringlet.allreduce_async(full_name, src, dst, core_op, float(prescale_factor),
                                      float(postscale_factor), _set_id(process_set),
                                      _stream_of(src))
    return _register(handle, lambda data, shape, splits: output, src, dst)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing ``tensor`` over the ranks into a new tensor; returns a handle."""
    op = _basics.resolve_op(op, average)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor,
                            process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing ``tensor`` over the ranks in place; returns a handle."""
    op = _basics.resolve_op(op, average)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor,
                            process_set)


class _Allreduce(torch.autograd.Function):
    """Allreduce whose gradient is the same allreduce of the incoming gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.scales = (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, None, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = synchronize(allreduce_async(grad_output.contiguous(), None, None, ctx.op,
                                              ctx.scales[0], ctx.scales[1], ctx.process_set))
        return reduced, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """The reduction (Average by default) of ``tensor`` over the ranks, as a new tensor.

    ``compression`` compresses the tensor for the transfer (Compression.fp16
    sends float16). Differentiable: the gradient is the same allreduce of the
    incoming gradient.
    """
    op = _basics.resolve_op(op, average)
    compressed, context = compression.compress(tensor)
    reduced = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                               process_set)
    return compression.decompress(reduced, context)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` over the ranks in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor,
                             process_set):
    if not tensors:
        raise ValueError("grouped_allreduce: the list of tensors is empty")
    core_op = _basics.core_op(op)
    base = _op_name("grouped_allreduce", name, process_set)
    names = [f"{base}.{i}" for i in range(len(tensors))]
    srcs = [_dense(t, "grouped_allreduce") for t in tensors]
    dsts = [_dense(o, "grouped_allreduce") for o in outputs]
    handles = _ringlet.grouped_allreduce_async(names, srcs, dsts, core_op, float(prescale_factor),
                                               float(postscale_factor), _set_id(process_set),
                                               _stream_of(srcs[0]))
    return [_register(h, lambda data, shape, splits, out=out: out, src, dst)
            for h, out, src, dst in zip(handles, outputs, srcs, dsts)]


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors as one fused collective; returns a list of handles."""
    op = _basics.resolve_op(op, average)
    outputs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    op = _basics.resolve_op(op, average)
    return _grouped_allreduce_async(tensors, tensors, name, op, prescale_factor,
                                    postscale_factor, process_set)


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.scales = (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        handles = grouped_allreduce_async(list(tensors), None, name, op, prescale_factor,
                                          postscale_factor, process_set)
        return tuple(synchronize(h) for h in handles)

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = [g.contiguous() for g in grad_outputs]
        handles = grouped_allreduce_async(grads, None, None, ctx.op, ctx.scales[0],
                                          ctx.scales[1], ctx.process_set)
        return (None, None, None, None, None) + tuple(synchronize(h) for h in handles)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces a list of tensors together (one fused collective); returns a list."""
    op = _basics.resolve_op(op, average)
    pairs = [compression.compress(t) for t in tensors]
    reduced = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                      *[c for c, _ in pairs])
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    handles = grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                       postscale_factor, process_set)
    return [synchronize(h) for h in handles]


# ---------------------------------------------------------------- allgather

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating ``tensor`` from every rank on dimension 0; returns a handle.

    Ranks may differ in dimension 0 only.
    """
    full_name = _op_name("allgather", name, process_set)
    src = _dense(tensor, "allgather")
    dtype, trailing = src.dtype, tuple(src.shape[1:])
    if src.dim() == 0:
        raise ValueError(f"allgather '{full_name}': a scalar has no dimension 0 to concatenate "
                         f"on; pass tensor.reshape(1)")
    as_bytes = dtype not in _REDUCIBLE
    if as_bytes:
        src = _as_rows_of_bytes(src.contiguous())
    handle = _ringlet.allgather_async(full_name, src, _set_id(process_set), _stream_of(src))

    def finish(data, shape, splits):
        rows = shape[0]
        if as_bytes:
            return _from_bytes(data, (rows, -1) if len(data) else (rows, 0),
                               torch.uint8).view(dtype).reshape((rows,) + trailing)
        return _from_bytes(data, shape, dtype)

    return _register(handle, finish, src)


class _Allgather(torch.autograd.Function):
    """Allgather whose gradient is this rank's rows of the summed incoming gradient."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0]
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = synchronize(allreduce_async(grad_output.contiguous(), None, None, Sum,
                                              process_set=ctx.process_set))
        rows = synchronize(allgather_async(torch.tensor([ctx.rows], dtype=torch.int64), None,
                                           ctx.process_set))
        ps = ctx.process_set
        my_index = _ringlet.process_set_rank(_set_id(ps))
        offset = int(rows[:my_index].sum())
        return reduced.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """``tensor`` from every rank concatenated on dimension 0 (differentiable)."""
    return _Allgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts allgathering each tensor of a list; returns the list of handles."""
    base = _handles.group_base(name, process_set)
    return [allgather_async(t, f"{base}.{i}", process_set) for i, t in enumerate(tensors)]


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of a list; returns the list of results."""
    return [synchronize(h) for h in grouped_allgather_async(tensors, name, process_set)]


# ---------------------------------------------------------------- broadcast

def _broadcast_async(tensor, output, root_rank, name, process_set):
    full_name = _op_name("broadcast", name, process_set)
    if output is not tensor:
        output.copy_(tensor.detach())
    dst = _dense(output, "broadcast")
    if not dst.is_contiguous():
        raise ValueError(f"broadcast '{full_name}': the tensor is not contiguous; broadcast "
                         f"tensor.contiguous() instead")
    if dst.dtype not in _REDUCIBLE:
        dst = dst.reshape(-1).view(torch.uint8) if dst.numel() else dst.reshape(-1).new_empty(
            0, dtype=torch.uint8)
    handle = _ringlet.broadcast_async(full_name, dst, int(root_rank), _set_id(process_set),
                                      _stream_of(dst))
    return _register(handle, lambda data, shape, splits: output, dst)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts sending ``root_rank``'s tensor to every rank, into a new tensor; returns a handle."""
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _broadcast_async(tensor, output, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts overwriting ``tensor`` with ``root_rank``'s on every rank; returns a handle."""
    return _broadcast_async(tensor, tensor, root_rank, name, process_set)


class _Broadcast(torch.autograd.Function):
    """Broadcast whose gradient is the summed incoming gradient at the root, zero elsewhere."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = synchronize(allreduce_async(grad_output.contiguous(), None, None, Sum,
                                              process_set=ctx.process_set))
        if _ringlet.rank() != ctx.root_rank:
            reduced.zero_()
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s ``tensor`` on every rank, as a new tensor (differentiable)."""
    return _Broadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites ``tensor`` with ``root_rank``'s on every rank and returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---------------------------------------------------------------- alltoall

def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts scattering rows of ``tensor`` to the ranks; returns a handle.

    ``splits[i]`` rows of dimension 0 go to the i-th member of the set (an
    even split when None). The result is (tensor, received splits).
    """
    full_name = _op_name("alltoall", name, process_set)
    src = _dense(tensor, "alltoall")
    if src.dim() == 0:
        raise ValueError(f"alltoall '{full_name}': a scalar has no rows to scatter")
    split_list = [] if splits is None else [int(s) for s in (
        splits.tolist() if isinstance(splits, torch.Tensor) else splits)]
    dtype, trailing = src.dtype, tuple(src.shape[1:])
    as_bytes = dtype not in _REDUCIBLE
    if as_bytes:
        src = _as_rows_of_bytes(src.contiguous())
    handle = _ringlet.alltoall_async(full_name, src, split_list, _set_id(process_set),
                                     _stream_of(src))

    def finish(data, shape, received):
        rows = shape[0]
        if as_bytes:
            out = _from_bytes(data, (rows, -1) if len(data) else (rows, 0),
                              torch.uint8).view(dtype).reshape((rows,) + trailing)
        else:
            out = _from_bytes(data, shape, dtype)
        return out, torch.tensor(received, dtype=torch.int32)

    return _register(handle, finish, src)


class _Alltoall(torch.autograd.Function):
    """Alltoall whose gradient goes back along the received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        ctx.process_set = process_set
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, grad_received):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(), ctx.received, None,
                                             ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Rows of ``tensor`` scattered to the ranks and theirs gathered here (differentiable).

    Returns the gathered tensor, and with it the rows received from each rank
    when ``splits`` was given.
    """
    output, received = _Alltoall.apply(tensor, splits, name, process_set)
    return output if splits is None else (output, received)


# ---------------------------------------------------------------- reducescatter

def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing ``tensor`` and scattering the rows; returns a handle.

    The i-th member receives its share of dimension 0 (an even split, the
    first ones one row more when it does not divide).
    """
    core_op = _basics.core_op(op)
    full_name = _op_name("reducescatter", name, process_set)
    src = _dense(tensor, "reducescatter")
    if src.dim() == 0:
        raise ValueError(f"reducescatter '{full_name}': a scalar has no rows to scatter")
    dtype = src.dtype
    handle = _ringlet.reducescatter_async(full_name, src, core_op, float(prescale_factor),
                                          float(postscale_factor), _set_id(process_set),
                                          _stream_of(src))
    return _register(handle, lambda data, shape, splits: _from_bytes(data, shape, dtype),
                     src)


class _Reducescatter(torch.autograd.Function):
    """Reducescatter whose gradient is the allgather of the incoming gradients."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.process_set = process_set
        ctx.scale = prescale_factor * postscale_factor
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(allgather_async(grad_output.contiguous(), None, ctx.process_set))
        if ctx.op == Average:
            grad = grad / _ringlet.process_set_size(_set_id(ctx.process_set))
        if ctx.scale != 1.0:
            grad = grad * ctx.scale
        return grad, None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share of the reduction of ``tensor`` over the ranks (differentiable)."""
    compressed, context = compression.compress(tensor)
    reduced = _Reducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                   postscale_factor)
    return compression.decompress(reduced, context)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    base = _handles.group_base(name, process_set)
    return [reducescatter_async(t, f"{base}.{i}", op, process_set, prescale_factor,
                                postscale_factor) for i, t in enumerate(tensors)]


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatters each tensor of a list; returns the list of this rank's shares."""
    pairs = [compression.compress(t) for t in tensors]
    handles = grouped_reducescatter_async([c for c, _ in pairs], name, op, process_set,
                                          prescale_factor, postscale_factor)
    return [compression.decompress(synchronize(h), ctx) for h, (_, ctx) in zip(handles, pairs)]


# ---------------------------------------------------------------- completion

def join(device=-1):
    """Says this rank has no more data: the others' allreduces go on with it contributing
    zeros. Returns the last rank to join."""
    return _ringlet.join()


def barrier(process_set=global_process_set):
    """Returns once every member of ``process_set`` has reached it."""
    _ringlet.barrier(_set_id(process_set))
