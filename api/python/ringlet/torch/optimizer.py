"""Horovod's DistributedOptimizer: each gradient's allreduce starts from a
hook as soon as backward has accumulated it, so that communication overlaps
the rest of backward; ``step()`` waits for them and then runs the wrapped
optimizer's own step."""

import contextlib
import warnings

import torch

from ringlet import _ringlet
from ringlet.common import basics as _basics
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.torch.compression import Compression
from ringlet.torch.mpi_ops import (Average, allgather_async, allreduce_async_,
                                   grouped_allreduce_async_, synchronize)


class _DistributedOptimizer:
    """Mixed in before the wrapped optimizer's class; see DistributedOptimizer()."""

    def _setup_distributed(self, named_parameters, compression, backward_passes_per_step, op,
                           gradient_predivide_factor, num_groups, groups, sparse_as_dense,
                           process_set):
        self._compression = compression
        self._op = op
        self._gradient_predivide_factor = gradient_predivide_factor
        self._sparse_as_dense = sparse_as_dense
        self._process_set = process_set
        self.backward_passes_per_step = backward_passes_per_step

        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            if any(not isinstance(item, tuple) for item in named):
                raise ValueError("named_parameters should be a sequence of (name, parameter) "
                                 "pairs, such as model.named_parameters()")
            names = [name for name, _ in named]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise ValueError(f"parameter names in named_parameters must be unique; "
                                 f"repeated: {', '.join(duplicates)}")
            known = {id(p) for _, p in named}
            unnamed = [p for p in params if id(p) not in known]
            if unnamed:
                raise ValueError(f"named_parameters was given, but {len(unnamed)} of the "
                                 f"optimizer's parameters are not in it")
        else:
            named = [(f"noname.{i}.{j}", p) for i, group in enumerate(self.param_groups)
                     for j, p in enumerate(group["params"])]
        self._names = {id(p): name for name, p in named}

        self._groups = self._make_groups(params, num_groups, groups)
        self._group_of = {id(p): g for g, members in enumerate(self._groups) for p in members}
        self._group_ready = [set() for _ in self._groups]

        self._finishers = {}  # id(param) -> a function returning the reduced gradient
        self._delay = {id(p): backward_passes_per_step for p in params}
        self._params = params
        self._synchronized = False
        self._should_synchronize = True
        self._hooks = []
        members = _ringlet.process_set_size(_set_id(process_set))
        if members > 1:
            for p in params:
                if p.requires_grad:
                    self._hooks.append(p.register_post_accumulate_grad_hook(self._make_hook()))

    @staticmethod
    def _make_groups(params, num_groups, groups):
        if groups is not None:
            if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
                raise ValueError("groups must be a list of lists of parameters")
            return [list(g) for g in groups if g]
        if num_groups and num_groups > 0:
            per = -(-len(params) // num_groups)
            return [params[i:i + per] for i in range(0, len(params), per)]
        return []

    def _scales(self):
        if self._op == Average:
            return 1.0 / self._gradient_predivide_factor, self._gradient_predivide_factor
        return 1.0, 1.0

    def _make_hook(self):
        def hook(p):
            key = id(p)
            if key in self._finishers and self._delay[key] <= 0:
                raise AssertionError(
                    "gradients were computed more than backward_passes_per_step times before "
                    "step(); raise backward_passes_per_step to accumulate them locally")
            self._delay[key] -= 1
            if self._delay[key] == 0:
                self._start(p)
        return hook

    def _start(self, p):
        """Starts reducing p's gradient (or p's group once all of it is ready)."""
        if p.grad is None:  # unused on this rank: the others still expect it
            p.grad = torch.zeros_like(p)
        if p.grad.is_sparse and self._sparse_as_dense:
            p.grad = p.grad.to_dense()
        group = self._group_of.get(id(p))
        if group is None or p.grad.is_sparse:
            self._finishers[id(p)] = self._reduce_one(p)
            return
        ready = self._group_ready[group]
        ready.add(id(p))
        if len(ready) == len(self._groups[group]):
            self._reduce_group(group)
            ready.clear()

    def _reduce_one(self, p):
        name = self._names[id(p)]
        if p.grad.is_sparse:
            return self._reduce_sparse(p, name)
        compressed, ctx = self._compression.compress(p.grad)
        prescale, postscale = self._scales()
        handle = allreduce_async_(compressed, name=name, op=self._op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self._process_set)
        return lambda: self._compression.decompress(synchronize(handle), ctx)

    def _reduce_group(self, group):
        members = [p for p in self._groups[group]]
        for p in members:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        pairs = [self._compression.compress(p.grad) for p in members]
        prescale, postscale = self._scales()
        handles = grouped_allreduce_async_([c for c, _ in pairs], name=f"group.{group}",
                                           op=self._op, prescale_factor=prescale,
                                           postscale_factor=postscale,
                                           process_set=self._process_set)
        for p, h, (_, ctx) in zip(members, handles, pairs):
            self._finishers[id(p)] = (lambda h=h, ctx=ctx:
                                      self._compression.decompress(synchronize(h), ctx))

    def _reduce_sparse(self, p, name):
        # A sparse gradient is gathered whole (indices and values of every rank)
        # and summed locally: its non-zeros differ between ranks.
        grad = p.grad.coalesce()
        values = allgather_async(grad._values(), name=f"{name}.values",
                                 process_set=self._process_set)
        indices = allgather_async(grad._indices().t().contiguous(), name=f"{name}.indices",
                                  process_set=self._process_set)
        members = _ringlet.process_set_size(_set_id(self._process_set))

        def finish():
            v = synchronize(values)
            i = synchronize(indices).t()
            if self._op == Average:
                v = v / members
            return torch.sparse_coo_tensor(i, v, grad.size(), check_invariants=False).coalesce()
        return finish

    def synchronize(self):
        """Waits for every gradient's allreduce (starting the ones no hook started)."""
        if not self._hooks:
            return
        for p in self._params:
            if p.requires_grad and id(p) not in self._finishers:
                group = self._group_of.get(id(p))
                if group is None or id(p) not in self._group_ready[group]:
                    self._delay[id(p)] = 0
                    self._start(p)
        for g, ready in enumerate(self._group_ready):
            if ready:  # a group some of whose members never got a gradient
                self._reduce_group(g)
                ready.clear()
        for p in self._params:
            finish = self._finishers.pop(id(p), None)
            if finish is None:
                continue
            reduced = finish()
            if reduced.is_sparse or p.grad.is_sparse:
                p.grad = reduced
            elif reduced is not p.grad:
                p.grad.copy_(reduced)
            self._delay[id(p)] = self.backward_passes_per_step
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Within it, step() does not synchronize (call synchronize() yourself first)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.synchronize() was called before optimizer.step(); "
                              "step() runs without synchronizing again: use "
                              "`with optimizer.skip_synchronize():` to say so")
            else:
                self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._finishers:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before "
                "optimizer.step() or optimizer.synchronize(); the allreduces in flight would "
                "race with it")
        return super().zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps a torch optimizer so that ``step()`` applies gradients reduced over the ranks.

    Arguments are Horovod's: ``named_parameters`` names the allreduces (pass
    ``model.named_parameters()``), ``compression`` what gradients are sent as,
    ``backward_passes_per_step`` how many backward passes accumulate locally
    before a reduction, ``op`` Average or Sum, ``gradient_predivide_factor``
    splits the averaging before and after the sum, ``num_groups`` or
    ``groups`` fuse gradients into grouped allreduces, ``sparse_as_dense``
    reduces sparse gradients as dense ones.
    """
    if op == _basics.Adasum:
        raise NotImplementedError("op=Adasum is not implemented by Ringlet yet; use Average "
                                  "or Sum")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor is only meaningful with op=Average")
    if backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be at least 1")
    base = optimizer.__class__
    cls = type(base.__name__, (_DistributedOptimizer, base), {})
    # The same object state (param groups, hyperparameters, step state and
    # hooks) under the distributed class, without re-running the wrapped
    # class's constructor and its positional arguments.
    distributed = cls.__new__(cls)
    distributed.__dict__.update(optimizer.__dict__)
    distributed._setup_distributed(named_parameters, compression, backward_passes_per_step, op,
                                   gradient_predivide_factor, num_groups, groups,
                                   sparse_as_dense, process_set)
    return distributed
