"""Batch normalization whose statistics cover the whole batch across the
ranks: each rank reduces its per-channel sums, and backward reduces the two
per-channel gradient sums the input's gradient needs. Every tensor it makes
lives on the input's device; statistics are float32 (float64 for float64
inputs), the output the input's dtype, as Horovod's."""

import torch
import torch.nn.functional as F

from ringlet import _ringlet
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.torch.mpi_ops import Sum, _given, _wait, allreduce_async


def _sum_over_ranks(tensor, process_set):
    # As the synchronous collectives wait: a call a signal interrupted is
    # resumed by the next one rather than submitted twice.
    return _wait("SyncBatchNorm", None, process_set, _given([tensor]),
                 lambda: allreduce_async(tensor, op=Sum, process_set=process_set))


class _SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, process_set):
        channels = x.shape[1]
        dims = [d for d in range(x.dim()) if d != 1]
        shape = [1, channels] + [1] * (x.dim() - 2)
        stats_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        xs = x.to(stats_dtype)
        # The one tensor made from nothing: on the input's device, as every
        # other (a host count beside CUDA sums cannot be concatenated).
        count = torch.tensor([x.numel() // channels], dtype=stats_dtype, device=x.device)
        packed = torch.cat([xs.sum(dims), (xs * xs).sum(dims), count])
        total = _sum_over_ranks(packed, process_set)
        n = total[-1]
        mean = total[:channels] / n
        var = (total[channels:2 * channels] / n - mean * mean).clamp_min(0)
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                unbiased = var * (n / (n - 1)) if n > 1 else var
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype) * momentum)
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
        xhat = (xs - mean.view(shape)) * invstd.view(shape)
        y = xhat
        if weight is not None:
            y = y * weight.to(stats_dtype).view(shape) + bias.to(stats_dtype).view(shape)
        ctx.save_for_backward(xhat, weight, invstd, n)
        ctx.process_set = process_set
        ctx.shape, ctx.dims = shape, dims
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, invstd, n = ctx.saved_tensors
        shape, dims = ctx.shape, ctx.dims
        channels = shape[1]
        dys = dy.to(xhat.dtype)
        sum_dy = dys.sum(dims)
        sum_dy_xhat = (dys * xhat).sum(dims)
        total = _sum_over_ranks(torch.cat([sum_dy, sum_dy_xhat]), ctx.process_set)
        mean_dy = (total[:channels] / n).view(shape)
        mean_dy_xhat = (total[channels:] / n).view(shape)
        scale = invstd.view(shape)
        if weight is not None:
            scale = scale * weight.to(xhat.dtype).view(shape)
        dx = (dys - mean_dy - xhat * mean_dy_xhat) * scale
        grad_weight = sum_dy_xhat.to(weight.dtype) if weight is not None else None
        grad_bias = sum_dy.to(weight.dtype) if weight is not None else None
        return dx.to(dy.dtype), grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    """BatchNorm over the batch of every rank of ``process_set`` (inputs (N, C, ...)).

    Evaluation with running statistics uses them, as BatchNorm does; without
    them (``track_running_stats=False``) it normalizes over the whole batch
    of every rank, as in training. Alone in its set it is plain batch
    normalization. The gradients of weight and bias are this rank's;
    DistributedOptimizer reduces them with the others.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected an input of 2 or more dimensions (N, C, ...), got "
                             f"{input.dim()}")

    def forward(self, input):
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                momentum = 1.0 / float(self.num_batches_tracked)
        members = _ringlet.process_set_size(_set_id(self.process_set))
        if not self.training and self.track_running_stats:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, False, momentum, self.eps)
        if members == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, True, momentum, self.eps)
        # Training, or evaluating without running statistics: the statistics of
        # the whole batch, as in Horovod.
        return _SyncBatchNorm.apply(input, self.weight, self.bias, self.running_mean,
                                    self.running_var, self.eps, momentum, self.process_set)
