"""horovod.torch's collectives on torch tensors, over Ringlet's runtime.

Every collective is named; the same name on every rank is the same
collective. The ``*_async`` forms return an integer handle at once (one for
a whole group, as in Horovod), and ``synchronize(handle)`` waits and returns
the result (a tuple for a group); ``poll(handle)`` says whether it would
wait. ``sparse_allreduce_async`` returns a function to call instead. The
forms without a trailing underscore leave their input alone and (when not
async) are differentiable with Horovod 0.28.1's gradient rules; the forms
with one work in place.
"""

import torch
from torch.utils.dlpack import to_dlpack as _to_dlpack

from ringlet import _ringlet
from ringlet.common import basics as _basics
from ringlet.common.api import *  # noqa: F401,F403  (horovod.torch.mpi_ops has these too)
from ringlet.common.basics import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from ringlet.common import handles as _handles
from ringlet.common.exceptions import InvalidArgumentError
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.torch.compression import Compression


def _dtypes(*names):
    """The dtypes of these names that this PyTorch has (uint16 came in 2.3)."""
    return {getattr(torch, n) for n in names if isinstance(getattr(torch, n, None), torch.dtype)}


# The dtypes the core reduces; the others (bool, complex, ...) are carried as
# bytes by the collectives that only move data.
_REDUCIBLE_NAMES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16",
                    "uint16", "int32", "int64")
_REDUCIBLE = _dtypes(*_REDUCIBLE_NAMES)

_op_name = _handles.op_name
_register = _handles.register
poll = _handles.poll
synchronize = _handles.synchronize


def _stream_of(tensor):
    if tensor.is_cuda:
        return torch.cuda.current_stream(tensor.device).cuda_stream
    return 0


def _dense(tensor, call):
    """The tensor as the core takes it: without autograd (detached only where
    autograd records it: a detach costs more than the rest of a submission's
    checks), and refused if its layout is not strided (sparse, mkldnn, ...).
    Contiguity is the bindings' check."""
    if tensor.layout != torch.strided:
        raise ValueError(f"{call}: {tensor.layout} tensors are not supported; pass a dense "
                         f"tensor (tensor.to_dense())")
    return tensor.detach() if tensor.requires_grad else tensor


def _check_reducible(tensor, call, full_name):
    """Refuses a reduction of a dtype the core does not reduce, in the core's words:
    PyTorch before 2.0 cannot even hand some of them (bool) through DLPack."""
    if tensor.dtype not in _REDUCIBLE:
        dtype = str(tensor.dtype).replace("torch.", "")
        served = [n for n in _REDUCIBLE_NAMES if hasattr(torch, n)]
        raise InvalidArgumentError(
            f"ringlet: {call} on rank {_ringlet.rank()}: tensor '{full_name}' has dtype "
            f"{dtype}, which is not supported ({', '.join(served[:-1])} and {served[-1]} are)")


def _given(tensors, **arguments):
    """What a synchronous call was given, as a retry must give it again to resume the
    call a signal interrupted: each tensor's dtype, shape and device, and the rest.
    A function that describes them when asked: only an interrupted call asks (the
    description cost more than the rest of the call's Python)."""
    return lambda: (tuple([(t.dtype, t.shape, t.device) for t in tensors]),
                    tuple(arguments.items()))


def _wait(call, name, process_set, given, start):
    """``synchronize(start())`` for a synchronous call, which resumes the call of the same
    function, name and process set that a signal interrupted (handles.wait_resuming)."""
    return _handles.wait_resuming((call, name, _set_id(process_set)), given, start)


def _into(targets, results):
    """The in-place result: a resumed call wrote into the interrupted call's tensors,
    which its retry may have allocated anew."""
    for target, result in zip(targets, results):
        if result is not target:
            target.copy_(result)
            if result.is_cuda:
                # A device result goes back to Ringlet's pool in the default stream's
                # order: that stream waits for the copy, which may run on another.
                torch.cuda.default_stream(result.device).wait_stream(
                    torch.cuda.current_stream(result.device))
    return targets


def _check_submittable(src, call, full_name):
    """Refuses, in the bindings' words, what they would refuse on submission: a
    tensor that is not contiguous, or not in host or CUDA memory. A grouped
    collective checks every member so before submitting any."""
    why = None
    if src.device.type not in ("cpu", "cuda"):
        why = f"lives in {src.device.type} memory; Ringlet serves host memory and CUDA devices"
    elif not src.is_contiguous():
        why = "is not contiguous; pass a contiguous tensor (for instance tensor.contiguous())"
    if why is not None:
        raise InvalidArgumentError(
            f"ringlet: {call} on rank {_ringlet.rank()}: tensor '{full_name}' {why}")


def _check_one_device(tensors, names, call):
    """Refuses a group whose members are on different devices, as Horovod does."""
    for tensor, name in zip(tensors, names):
        if tensor.device != tensors[0].device:
            raise InvalidArgumentError(
                f"ringlet: {call} on rank {_ringlet.rank()}: tensor '{name}' is on "
                f"{tensor.device} and the group's first on {tensors[0].device}; the members "
                f"of a group share one device")


def _set_rank(process_set):
    return _ringlet.process_set_rank(_set_id(process_set))


def _set_size(process_set):
    return _ringlet.process_set_size(_set_id(process_set))


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


def _rows_before(counts, process_set):
    """For each of this rank's row counts, the rows the members before it hold.

    One allgather of every count: member i's row of the gathered table holds
    its counts, so the rows before this rank are the sums of the rows above.
    """
    mine = torch.tensor([counts], dtype=torch.int64)
    table = _wait("allgather.rows_before", None, process_set, _given([mine]),
                  lambda: allgather_async(mine, None, process_set))
    return [int(v) for v in table[:_set_rank(process_set)].sum(0).tolist()]


# ---------------------------------------------------------------- allreduce

def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set):
    core_op = _basics.core_op(op)
    full_name = _op_name("allreduce", name, process_set)
    src = _dense(tensor, "allreduce")
    dst = src if output is tensor else _dense(output, "allreduce")
    _check_reducible(src, "allreduce_async", full_name)
    # Capsules from to_dlpack: a tenth of Tensor.__dlpack__'s cost (its checks
    # are done above, and the stream is handed over beside them).
    handle = _ringlet.allreduce_async(full_name, _to_dlpack(src),
                                      None if dst is src else _to_dlpack(dst), core_op,
                                      float(prescale_factor), float(postscale_factor),
                                      _set_id(process_set), _stream_of(src))
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
    """Allreduce whose gradient is the same allreduce (op and scales) of the incoming
    gradients."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.scales = (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return _wait("allreduce", name, process_set,
                     _given([tensor], op=op, scales=ctx.scales),
                     lambda: allreduce_async(tensor, None, name, op, prescale_factor,
                                             postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = allreduce(grad_output.contiguous(), op=ctx.op, prescale_factor=ctx.scales[0],
                            postscale_factor=ctx.scales[1], process_set=ctx.process_set)
        return reduced, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """The reduction (Average by default) of ``tensor`` over the ranks, as a new tensor.

    ``compression`` compresses the tensor for the transfer (Compression.fp16
    sends float16). Differentiable: the gradient is the same allreduce (op,
    prescale and postscale) of the incoming gradients.
    """
    op = _basics.resolve_op(op, average)
    compressed, context = compression.compress(tensor)
    reduced = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                               process_set)
    return compression.decompress(reduced, context)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` over the ranks in place and returns it."""
    op = _basics.resolve_op(op, average)
    result = _wait("allreduce_", name, process_set,
                   _given([tensor], op=op, scales=(prescale_factor, postscale_factor)),
                   lambda: allreduce_async_(tensor, None, name, op, prescale_factor,
                                            postscale_factor, process_set))
    return _into([tensor], [result])[0]


def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor,
                             process_set):
    if not tensors:
        raise ValueError("grouped_allreduce: the list of tensors is empty")
    core_op = _basics.core_op(op)
    base = _op_name("grouped_allreduce", name, process_set)
    names = [f"{base}.{i}" for i in range(len(tensors))]
    srcs = [_dense(t, "grouped_allreduce") for t in tensors]
    dsts = [_dense(o, "grouped_allreduce") for o in outputs]
    for src, member in zip(srcs, names):
        _check_reducible(src, "grouped_allreduce_async", member)
    handles = _ringlet.grouped_allreduce_async(names, srcs, dsts, core_op, float(prescale_factor),
                                               float(postscale_factor), _set_id(process_set),
                                               _stream_of(srcs[0]))
    outputs = tuple(outputs)
    return _handles.register_group(handles, lambda results: outputs, *srcs, *dsts)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors as one fused collective; returns one handle,
    whose ``synchronize()`` gives the tuple of reduced tensors."""
    op = _basics.resolve_op(op, average)
    outputs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors in place as one fused collective; returns one
    handle, whose ``synchronize()`` gives the tuple of the tensors."""
    op = _basics.resolve_op(op, average)
    return _grouped_allreduce_async(tensors, tensors, name, op, prescale_factor,
                                    postscale_factor, process_set)


class _GroupedAllreduce(torch.autograd.Function):
    """Grouped allreduce whose gradients are the same grouped allreduce of the incoming
    gradients."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.scales = (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return _wait("grouped_allreduce", name, process_set,
                     _given(tensors, op=op, scales=ctx.scales),
                     lambda: grouped_allreduce_async(list(tensors), None, name, op,
                                                     prescale_factor, postscale_factor,
                                                     process_set))

    @staticmethod
    def backward(ctx, *grad_outputs):
        reduced = grouped_allreduce([g.contiguous() for g in grad_outputs], op=ctx.op,
                                    prescale_factor=ctx.scales[0],
                                    postscale_factor=ctx.scales[1], process_set=ctx.process_set)
        return (None, None, None, None, None) + tuple(reduced)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces a list of tensors together (one fused collective); returns a list.

    Differentiable as ``allreduce`` is, tensor by tensor.
    """
    op = _basics.resolve_op(op, average)
    pairs = [compression.compress(t) for t in tensors]
    reduced = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                      *[c for c, _ in pairs])
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors in place (one fused collective); returns them as a tuple."""
    op = _basics.resolve_op(op, average)
    results = _wait("grouped_allreduce_", name, process_set,
                    _given(tensors, op=op, scales=(prescale_factor, postscale_factor)),
                    lambda: grouped_allreduce_async_(tensors, None, name, op, prescale_factor,
                                                     postscale_factor, process_set))
    return tuple(_into(list(tensors), results))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts reducing a sparse COO tensor over the ranks; returns a function (not an
    integer handle) that waits and gives the result.

    Every member's indices and values are allgathered (as "<name>.indices" and
    "<name>.values"), since the non-zeros differ between ranks; the result
    holds all of them, in rank order and not coalesced (duplicate indices
    add up), with the values divided by the set's size for Average.
    """
    if not tensor.is_sparse:
        raise ValueError(f"sparse_allreduce_async '{name}': the tensor is {tensor.layout}, not "
                         f"sparse; use allreduce_async")
    if op == Adasum:
        raise NotImplementedError("op=Adasum is not implemented by Ringlet yet; use Average "
                                  "or Sum")
    if op not in (Average, Sum):
        raise ValueError(f"sparse_allreduce_async '{name}': op {_basics.op_name(op)} is not "
                         f"served; a sparse reduction is Sum or Average")
    # One group of the two allgathers (submitted in this order, as Horovod
    # does): both are checked before either starts, and waited for before an
    # error of either is raised.
    group = _submit_group([
        _allgather_request(tensor._indices().t().contiguous(),
                           _op_name("allgather", f"{name}.indices", process_set), process_set),
        _allgather_request(tensor._values().contiguous(),
                           _op_name("allgather", f"{name}.values", process_set), process_set)])
    members = _set_size(process_set)

    def wait():
        # A signal's exception leaves both pending for the next call; once the
        # result (or the error) was given, the next call gives None, as
        # synchronize() of a handle synchronized already.
        gathered = synchronize(group)
        if gathered is None:
            return None
        gathered_indices, gathered_values = gathered
        if op == Average:
            gathered_values = gathered_values / members
        # The legacy constructor, as it takes the entries without checking them
        # (sparse_coo_tensor warns that it does not, from PyTorch 2.0 on).
        return tensor.new(gathered_indices.t(), gathered_values, tensor.size())
    return wait


def _submit_group(requests):
    """Submits the members of a grouped allgather or reducescatter, each
    (submit, finish, buffer), all of which passed their checks: a member they
    refuse leaves none of the group in flight, never to be synchronized.
    Returns the group's one handle."""
    handles = [submit() for submit, _, _ in requests]
    finishes = [finish for _, finish, _ in requests]
    return _handles.register_group(
        handles, lambda results: tuple(f(*r) for f, r in zip(finishes, results)),
        *[src for _, _, src in requests])


# ---------------------------------------------------------------- allgather

def _allgather_request(tensor, full_name, process_set):
    """Checks one allgather; returns what submits it (giving the core's handle), what
    turns its result into a tensor, and the buffer the core reads."""
    src = _dense(tensor, "allgather")
    dtype, trailing = src.dtype, tuple(src.shape[1:])
    if src.dim() == 0:
        raise ValueError(f"allgather '{full_name}': a scalar has no dimension 0 to concatenate "
                         f"on; pass tensor.reshape(1)")
    as_bytes = dtype not in _REDUCIBLE
    if as_bytes:
        src = _as_rows_of_bytes(src.contiguous())
    _check_submittable(src, "allgather_async", full_name)

    def submit():
        return _ringlet.allgather_async(full_name, src, _set_id(process_set), _stream_of(src))

    def finish(data, shape, splits):
        rows = shape[0]
        if as_bytes:
            return _from_bytes(data, (rows, -1) if len(data) else (rows, 0),
                               torch.uint8).view(dtype).reshape((rows,) + trailing)
        return _from_bytes(data, shape, dtype)

    return submit, finish, src


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating ``tensor`` from every rank on dimension 0; returns a handle.

    Ranks may differ in dimension 0 only.
    """
    submit, finish, src = _allgather_request(tensor, _op_name("allgather", name, process_set),
                                             process_set)
    return _register(submit(), finish, src)


class _Allgather(torch.autograd.Function):
    """Allgather whose gradient is this rank's rows of the average of the incoming
    gradients over the ranks."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0]
        ctx.process_set = process_set
        return _wait("allgather", name, process_set, _given([tensor]),
                     lambda: allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        averaged = allreduce(grad_output.contiguous(), op=Average, process_set=ctx.process_set)
        offset, = _rows_before([ctx.rows], ctx.process_set)
        return averaged.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """``tensor`` from every rank concatenated on dimension 0 (differentiable: the
    gradient is this rank's rows of the incoming gradients averaged over the ranks)."""
    return _Allgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts allgathering each tensor of a list; returns one handle, whose
    ``synchronize()`` gives the tuple of gathered tensors."""
    if not tensors:
        raise ValueError("grouped_allgather: the list of tensors is empty")
    base = _handles.group_base(name, process_set)
    names = [_op_name("allgather", f"{base}.{i}", process_set) for i in range(len(tensors))]
    _check_one_device(tensors, names, "grouped_allgather_async")
    return _submit_group([_allgather_request(t, n, process_set)
                          for t, n in zip(tensors, names)])


class _GroupedAllgather(torch.autograd.Function):
    """Grouped allgather whose gradients are, tensor by tensor, this rank's rows of the
    incoming gradients averaged over the ranks."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] for t in tensors]
        ctx.process_set = process_set
        return _wait("grouped_allgather", name, process_set, _given(tensors),
                     lambda: grouped_allgather_async(list(tensors), name, process_set))

    @staticmethod
    def backward(ctx, *grad_outputs):
        averaged = grouped_allreduce([g.contiguous() for g in grad_outputs], op=Average,
                                     process_set=ctx.process_set)
        offsets = _rows_before(ctx.rows, ctx.process_set)
        return (None, None) + tuple(g.narrow(0, offset, rows)
                                    for g, offset, rows in zip(averaged, offsets, ctx.rows))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of a list; returns the tuple of results (differentiable
    as ``allgather`` is)."""
    return _GroupedAllgather.apply(name, process_set, *tensors)


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
    """Broadcast whose gradient is, at the root, the average of the incoming gradients
    over the ranks, and zero elsewhere."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return _wait("broadcast", name, process_set, _given([tensor], root_rank=root_rank),
                     lambda: broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        averaged = allreduce(grad_output.contiguous(), op=Average, process_set=ctx.process_set)
        if _ringlet.rank() != ctx.root_rank:
            averaged = averaged * 0  # times zero, as in Horovod: an inf or NaN gives NaN
        return averaged, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s ``tensor`` on every rank, as a new tensor (differentiable: the
    gradient is the incoming gradients averaged over the ranks at the root, zero
    elsewhere)."""
    return _Broadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites ``tensor`` with ``root_rank``'s on every rank and returns it."""
    result = _wait("broadcast_", name, process_set, _given([tensor], root_rank=root_rank),
                   lambda: broadcast_async_(tensor, root_rank, name, process_set))
    return _into([tensor], [result])[0]


# ---------------------------------------------------------------- alltoall

def _split_list(splits, full_name):
    """``splits`` as a list of ints: a list, or a 1-D int32 tensor as Horovod takes."""
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dtype != torch.int32 or splits.dim() != 1:
            raise ValueError(f"alltoall '{full_name}': splits must be a 1-D int32 tensor (or a "
                             f"list of ints), not a {splits.dim()}-D {splits.dtype} tensor")
        return [int(s) for s in splits.tolist()]
    return [int(s) for s in splits]


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts scattering rows of ``tensor`` to the ranks; returns a handle.

    ``splits[i]`` rows of dimension 0 go to the i-th member of the set (an
    even split when None); rows past their sum are not sent. The result is
    (tensor, received splits), the received splits an int32 tensor on the device of
    ``splits`` (on the host when ``splits`` is a list or None).
    """
    full_name = _op_name("alltoall", name, process_set)
    src = _dense(tensor, "alltoall")
    if src.dim() == 0:
        raise ValueError(f"alltoall '{full_name}': a scalar has no rows to scatter")
    split_list = _split_list(splits, full_name)
    # The received splits where Horovod puts them: on the splits' device.
    splits_device = splits.device if isinstance(splits, torch.Tensor) else torch.device("cpu")
    if split_list and 0 <= sum(split_list) < src.shape[0]:
        src = src.narrow(0, 0, sum(split_list))  # Horovod sends the first rows only
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
        return out, torch.tensor(received, dtype=torch.int32, device=splits_device)

    return _register(handle, finish, src)


class _Alltoall(torch.autograd.Function):
    """Alltoall whose gradient goes back along the received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        ctx.process_set = process_set
        ctx.rows = tensor.shape[0]
        listed = splits.tolist() if isinstance(splits, torch.Tensor) else splits
        output, received = _wait("alltoall", name, process_set, _given([tensor], splits=listed),
                                 lambda: alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, grad_received):
        grad, _ = alltoall(grad_output.contiguous(), splits=ctx.received,
                           process_set=ctx.process_set)
        if grad.shape[0] < ctx.rows:  # the rows not sent have no gradient
            grad = torch.cat([grad, grad.new_zeros((ctx.rows - grad.shape[0],) + grad.shape[1:])])
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Rows of ``tensor`` scattered to the ranks and theirs gathered here (differentiable).

    Returns the gathered tensor, and with it the rows received from each rank
    when ``splits`` was given.
    """
    output, received = _Alltoall.apply(tensor, splits, name, process_set)
    return output if splits is None else (output, received)


# ---------------------------------------------------------------- reducescatter

def _reducescatter_request(tensor, full_name, op, process_set, prescale_factor,
                           postscale_factor):
    """Checks one reducescatter; returns what submits it (giving the core's handle),
    what turns its result into a tensor, and the buffer the core reads."""
    core_op = _basics.core_op(op)
    src = _dense(tensor, "reducescatter")
    if src.dim() == 0:
        raise ValueError(f"reducescatter '{full_name}': a scalar has no rows to scatter")
    _check_reducible(src, "reducescatter_async", full_name)
    _check_submittable(src, "reducescatter_async", full_name)
    dtype = src.dtype

    def submit():
        return _ringlet.reducescatter_async(full_name, src, core_op, float(prescale_factor),
                                            float(postscale_factor), _set_id(process_set),
                                            _stream_of(src))

    return submit, lambda data, shape, splits: _from_bytes(data, shape, dtype), src


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing ``tensor`` and scattering the rows; returns a handle.

    The i-th member receives its share of dimension 0 (an even split, the
    first ones one row more when it does not divide).
    """
    submit, finish, src = _reducescatter_request(
        tensor, _op_name("reducescatter", name, process_set), op, process_set,
        prescale_factor, postscale_factor)
    return _register(submit(), finish, src)


def _reducescatter_gradients(grads, op, process_set, prescale_factor, postscale_factor):
    """Horovod's rule before the allgather: times the set's size for Sum (nothing for
    Average), then times the prescale and the postscale."""
    if op == Sum:
        grads = [g * _set_size(process_set) for g in grads]
    if prescale_factor != 1.0:
        grads = [g * prescale_factor for g in grads]
    if postscale_factor != 1.0:
        grads = [g * postscale_factor for g in grads]
    return [g.contiguous() for g in grads]


class _Reducescatter(torch.autograd.Function):
    """Reducescatter whose gradient is the allgather of the shares' gradients, scaled by
    Horovod's rule (_reducescatter_gradients)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.process_set = process_set
        ctx.scales = (prescale_factor, postscale_factor)
        return _wait("reducescatter", name, process_set,
                     _given([tensor], op=op, scales=ctx.scales),
                     lambda: reducescatter_async(tensor, name, op, process_set,
                                                 prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad, = _reducescatter_gradients([grad_output], ctx.op, ctx.process_set, *ctx.scales)
        return allgather(grad, process_set=ctx.process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share of the reduction of ``tensor`` over the ranks (differentiable:
    the gradient is the allgather of the shares' gradients, times the set's size for
    Sum, times the prescale and postscale)."""
    compressed, context = compression.compress(tensor)
    reduced = _Reducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                   postscale_factor)
    return compression.decompress(reduced, context)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducescattering each tensor of a list; returns one handle, whose
    ``synchronize()`` gives the tuple of this rank's shares."""
    if not tensors:
        raise ValueError("grouped_reducescatter: the list of tensors is empty")
    base = _handles.group_base(name, process_set)
    names = [_op_name("reducescatter", f"{base}.{i}", process_set) for i in range(len(tensors))]
    _check_one_device(tensors, names, "grouped_reducescatter_async")
    return _submit_group([_reducescatter_request(t, n, op, process_set, prescale_factor,
                                                 postscale_factor)
                          for t, n in zip(tensors, names)])


class _GroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter whose gradients follow ``reducescatter``'s rule, tensor by
    tensor, through one grouped allgather."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.op = op
        ctx.process_set = process_set
        ctx.scales = (prescale_factor, postscale_factor)
        return _wait("grouped_reducescatter", name, process_set,
                     _given(tensors, op=op, scales=ctx.scales),
                     lambda: grouped_reducescatter_async(list(tensors), name, op, process_set,
                                                         prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = _reducescatter_gradients(list(grad_outputs), ctx.op, ctx.process_set,
                                         *ctx.scales)
        return (None, None, None, None, None) + tuple(
            grouped_allgather(grads, process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatters each tensor of a list; returns the list of this rank's shares
    (differentiable as ``reducescatter`` is)."""
    pairs = [compression.compress(t) for t in tensors]
    reduced = _GroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                          postscale_factor, *[c for c, _ in pairs])
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, pairs)]


# ---------------------------------------------------------------- completion

def join(device=-1):
    """Says this rank has no more data: the others' allreduces go on with it contributing
    zeros. Returns the last rank to join."""
    return _ringlet.join()


def barrier(process_set=global_process_set):
    """Returns once every member of ``process_set`` has reached it."""
    _ringlet.barrier(_set_id(process_set))
