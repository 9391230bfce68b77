"""Horovod's DistributedOptimizer: each gradient's allreduce starts from a
hook as soon as backward has accumulated it, so that communication overlaps
the rest of backward; ``step()`` waits for them and then runs the wrapped
optimizer's own step.

The bookkeeping is Horovod's, so that scripts see the same gradients and the
same errors: a parameter's hook counts down ``backward_passes_per_step``
passes and starts its allreduce at zero (or, with ``groups``, the group's
grouped allreduce once every member reached zero); ``synchronize()`` starts
whatever no hook started, waits for everything and writes the results into
``p.grad``.
"""

import contextlib
import warnings
import weakref

import torch

from ringlet import _ringlet
from ringlet.common import basics as _basics
from ringlet.common import exceptions
from ringlet.common.process_sets import global_process_set, id_of as _set_id
from ringlet.torch.compression import Compression
from ringlet.torch.functions import broadcast_object
from ringlet.torch.mpi_ops import (Average, allreduce_async_, grouped_allreduce_async_,
                                   sparse_allreduce_async, synchronize)


def _after_accumulation(p, hook):
    """Calls ``hook()`` each time backward has accumulated a gradient into ``p.grad``;
    returns what keeps it registered: from PyTorch 2.1 its RemovableHandle (whose
    remove() unregisters it), before 2.1 the accumulator that holds the hook."""
    if hasattr(p, "register_post_accumulate_grad_hook"):  # PyTorch 2.1 and later
        return p.register_post_accumulate_grad_hook(lambda _: hook())
    # Before 2.1: a hook on the node that accumulates p's gradient, reached
    # through a view of p (p itself, a leaf, has no grad_fn; the view has one
    # only where grad mode is on).
    with torch.enable_grad():
        accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
    accumulator.register_hook(lambda *_: hook())
    return accumulator


def _remove_hooks(keepers):
    """Unregisters what _after_accumulation returned: a hook on a parameter would
    otherwise outlive its optimizer (the accumulators of PyTorch before 2.1 let
    theirs go with the last reference)."""
    for keeper in keepers:
        if hasattr(keeper, "remove"):
            keeper.remove()


def _split_evenly(items, n):
    """``items`` in ``n`` consecutive chunks whose sizes differ by one at most, the
    longer ones first (some empty when there are fewer items than chunks)."""
    size, extra = divmod(len(items), n)
    bounds = [i * size + min(i, extra) for i in range(n + 1)]
    return [items[bounds[i]:bounds[i + 1]] for i in range(n)]


class _DistributedOptimizer:
    """Mixed in before the wrapped optimizer's class; see DistributedOptimizer()."""

    def _setup_distributed(self, named_parameters, compression, backward_passes_per_step, op,
                           gradient_predivide_factor, groups, sparse_as_dense, process_set):
        self._compression = compression
        named = self._checked_names(named_parameters)
        self._parameter_names = {p: name for name, p in named}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for _, p in named}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set

        # parameter -> (an integer handle, a function giving the reduced sparse
        # gradient, or None while its backward passes are not all done; the
        # compression context)
        self._handles = {}
        # index of a group -> (the grouped allreduce's handle, the contexts)
        self._group_handles = {}
        # Parameters whose reduced gradient this step's synchronize() applied
        # already: a synchronize() that a signal or a failure stopped is
        # resumed by the next, which must not reduce them again.
        self._reduced = set()
        self._requires_update = []
        self._hook_keepers = []
        self._synchronized = False
        self._should_synchronize = True

        self._groups = self._checked_groups(groups)
        self._parameter_groups = []  # the groups formed from _groups, as lists
        self._group_of = {}  # parameter -> index in _parameter_groups
        self._group_counts = []  # hooks of each group that reached zero
        if self._included() and _ringlet.size() > 1:
            self._register_hooks()

    def _included(self):
        return _ringlet.process_set_rank(_set_id(self.process_set)) >= 0

    def _checked_names(self, named_parameters):
        """(name, parameter) pairs covering every parameter of the optimizer."""
        if named_parameters is not None:
            named = list(named_parameters)
        else:
            named = [(f"allreduce.noname.{i}.{j}", p) for i, group in enumerate(self.param_groups)
                     for j, p in enumerate(group["params"])]
        if any(not isinstance(item, tuple) for item in named):
            raise ValueError("named_parameters should be a sequence of (name, parameter) "
                             "tuples, such as model.named_parameters()")
        seen, duplicates = set(), set()
        for name, _ in named:
            (duplicates if name in seen else seen).add(name)
        if duplicates:
            raise ValueError(f"parameter names in named_parameters must be unique; found "
                             f"duplicates: {', '.join(sorted(map(str, duplicates)))}")
        named_ids = {id(p) for _, p in named}
        unnamed = [id(p) for group in self.param_groups for p in group["params"]
                   if id(p) not in named_ids]
        if unnamed:
            raise ValueError(f"named_parameters was specified, but one or more of the "
                             f"optimizer's parameters were not named; their Python object "
                             f"ids: {', '.join(str(i) for i in unnamed)}")
        return named

    @staticmethod
    def _checked_groups(groups):
        if groups is None:
            return None
        if not isinstance(groups, list):
            if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
                raise ValueError(f"groups should be a positive number of groups or a list of "
                                 f"lists of torch.Tensor, not {groups!r}")
            return groups
        grouped = set()
        for group in groups:
            for p in group:
                if not isinstance(p, torch.Tensor):
                    raise ValueError(f"groups must consist of torch.Tensor, not {type(p)}")
                if id(p) in grouped:
                    raise ValueError("a parameter can only appear once in groups")
                grouped.add(id(p))
        return groups

    def _register_hooks(self):
        hooked = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        if self._groups is not None:
            self._form_groups(hooked)
        # The hooks hold the optimizer weakly, and go with it: an optimizer
        # dropped (wrapping the model anew) must not go on starting allreduces
        # under the parameters' names, as Horovod's stop once collected.
        owner = weakref.ref(self)

        def hook_of(p):
            def hook():
                optimizer = owner()
                if optimizer is not None:
                    optimizer._gradient_accumulated(p)
            return hook

        for p in hooked:
            self._requires_update.append(p)
            self._hook_keepers.append(_after_accumulation(p, hook_of(p)))
        weakref.finalize(self, _remove_hooks, self._hook_keepers)

    def _form_groups(self, hooked):
        """Groups in the first member's order of the parameters, the same on every rank
        whatever order each rank's optimizer holds them in."""
        ranks = _ringlet.process_set_ranks(_set_id(self.process_set))
        names = [self._parameter_names[p] for p in hooked]
        order = broadcast_object(names, root_rank=ranks[0], process_set=self.process_set,
                                 name="DistributedOptimizer.parameter_order")
        position = {name: i for i, name in enumerate(order)}
        missing = [name for name in names if name not in position]
        if missing:
            raise ValueError(f"DistributedOptimizer with groups: parameters "
                             f"{', '.join(missing)} are not among rank {ranks[0]}'s")
        hooked = sorted(hooked, key=lambda p: position[self._parameter_names[p]])
        if isinstance(self._groups, list):
            hooked_ids = {id(p) for p in hooked}
            groups = [[p for p in group if id(p) in hooked_ids] for group in self._groups]
            in_groups = {id(p) for group in groups for p in group}
            groups += [[p] for p in hooked if id(p) not in in_groups]
        else:
            groups = _split_evenly(hooked, self._groups)
        self._parameter_groups = groups
        self._group_counts = [0] * len(groups)
        self._group_of = {p: g for g, members in enumerate(groups) for p in members}

    def set_backward_passes_per_step(self, passes):
        """From now on, ``passes`` backward passes accumulate locally before a reduction."""
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _gradient_accumulated(self, p):
        """The hook: counts the pass and starts p's allreduce (or its group's) at zero."""
        if self._handles.get(p, (None,))[0] is not None and self._allreduce_delay[p] <= 0:
            raise AssertionError(
                "gradients were computed more than backward_passes_per_step times before "
                "the call to step(); raise backward_passes_per_step to accumulate "
                "gradients locally")
        if p.grad.requires_grad:
            raise AssertionError("DistributedOptimizer does not serve gradients that "
                                 "require grad (backward(create_graph=True))")
        if self._allreduce_delay[p] <= 0:
            raise AssertionError(
                f"a gradient of {self._parameter_names[p]} was computed again after its "
                f"group's allreduce started; call step() or synchronize() first")
        handle, ctx = None, None
        if self._allreduce_delay[p] == self.backward_passes_per_step:
            self._reduced.discard(p)  # the first pass of a new step
        self._allreduce_delay[p] -= 1
        if self._allreduce_delay[p] == 0:
            if self._groups is not None:
                g = self._group_of[p]
                self._group_counts[g] += 1
                if self._group_counts[g] == len(self._parameter_groups[g]):
                    self._group_handles[g] = self._grouped_allreduce_grad_async(g)
                    for member in self._parameter_groups[g]:
                        self._handles.pop(member, None)
                    self._group_counts[g] = 0
                    return
            else:
                handle, ctx = self._allreduce_grad_async(p)
        self._handles[p] = (handle, ctx)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # Unused here, but another rank may have a gradient for it and
            # waits for this rank's part.
            p.grad = torch.zeros_like(p.data, memory_format=torch.contiguous_format)
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                return sparse_allreduce_async(tensor, name=name, op=self.op,
                                              process_set=self.process_set), None
            tensor = tensor.to_dense()
        compressed, ctx = self._compression.compress(tensor)
        if self.op == Average:
            # The average's 1/size joins the postscale in the core.
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor
        else:
            prescale, postscale = 1.0, 1.0
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, g):
        # Named after the first member; like Horovod, without the
        # gradient_predivide_factor split (the average is the same).
        members = self._parameter_groups[g]
        pairs = [self._compression.compress(p.grad) for p in members]
        handle = grouped_allreduce_async_([c for c, _ in pairs],
                                          name=self._parameter_names.get(members[0]),
                                          op=self.op, process_set=self.process_set)
        return handle, [ctx for _, ctx in pairs]

    def synchronize(self):
        """Waits for every gradient's allreduce, starting those no hook started (gradients
        this rank did not compute are reduced as zeros), and writes them into ``p.grad``.

        A signal handler's exception or a failed allreduce stops it with the
        gradients written so far kept: calling it again waits for the rest
        (and reduces the failed ones anew) without reducing any twice."""
        if not self._included():
            self._synchronized = True
            return
        started = set(self._handles) | self._reduced
        for g in self._group_handles:
            started.update(self._parameter_groups[g])
        for p in self._requires_update:
            if p not in started:
                self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, _) in list(self._handles.items()):
            if handle is None:  # fewer backward passes than backward_passes_per_step
                self._handles[p] = self._allreduce_grad_async(p)

        # Each entry goes as its result is written (or its failure raised): a
        # call after an interruption waits for the ones still pending alone.
        for g, (handle, ctxs) in list(self._group_handles.items()):
            try:
                outputs = synchronize(handle)
            except exceptions.FAILURES:  # reduced anew by the next call
                for p in self._parameter_groups[g]:
                    self._allreduce_delay[p] = self.backward_passes_per_step
                self._group_counts[g] = 0
                del self._group_handles[g]
                raise
            for p, output, ctx in zip(self._parameter_groups[g], outputs, ctxs):
                self._allreduce_delay[p] = self.backward_passes_per_step
                p.grad.set_(self._compression.decompress(output, ctx))
                self._reduced.add(p)
            self._group_counts[g] = 0
            del self._group_handles[g]
        for p, (handle, ctx) in list(self._handles.items()):
            try:
                output = handle() if callable(handle) else synchronize(handle)
            except exceptions.FAILURES:  # reduced anew by the next call
                self._allreduce_delay[p] = self.backward_passes_per_step
                del self._handles[p]
                raise
            self._allreduce_delay[p] = self.backward_passes_per_step
            if self._groups is not None:
                self._group_counts[self._group_of[p]] = 0
            reduced = self._compression.decompress(output, ctx)
            if p.grad.is_sparse:
                # sparse_as_dense reduced a dense copy: the update gets a sparse
                # gradient again, as the optimizer expects.
                p.grad.zero_().add_(reduced if reduced.is_sparse else reduced.to_sparse())
            else:
                p.grad.set_(reduced)
            self._reduced.add(p)
            del self._handles[p]
        self._reduced.clear()
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
                warnings.warn(
                    "optimizer.step() called without optimizer.skip_synchronize() context "
                    "after optimizer.synchronize(): step() reduces the gradients a second "
                    "time, which slows training (and multiplies them by the ranks with "
                    "op=Sum); call step() inside `with optimizer.skip_synchronize():`")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles or self._group_handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before "
                "optimizer.step() or optimizer.synchronize(): the allreduces in flight would "
                "race with it")
        self._reduced.clear()  # a new step: nothing of it is reduced yet
        return super().zero_grad(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        """The wrapped optimizer's, after forgetting the reductions in flight and the
        backward passes counted so far."""
        self._handles = {}
        self._group_handles = {}
        self._reduced = set()
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        return super().load_state_dict(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps a torch optimizer so that ``step()`` applies gradients reduced over the ranks.

    Arguments are Horovod's: ``named_parameters`` names the allreduces (pass
    ``model.named_parameters()``; without it they are
    ``allreduce.noname.<group>.<index>``), ``compression`` what gradients are
    sent as, ``backward_passes_per_step`` how many backward passes accumulate
    locally before a reduction, ``op`` Average or Sum,
    ``gradient_predivide_factor`` splits the averaging before and after the
    sum, ``groups`` (a number of groups, or lists of parameters) fuses
    gradients into grouped allreduces (``num_groups`` is its deprecated
    name), ``sparse_as_dense`` reduces sparse gradients as dense ones (the
    update still gets them sparse). The result is an instance of the wrapped
    optimizer's class, with its state and hyperparameters.
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor is only served with op=Average")
    if num_groups != 0:
        warnings.warn("DistributedOptimizer: num_groups is replaced by groups (groups=N makes "
                      "N groups) and will be removed in v0.23.0", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    if op == _basics.Adasum:
        raise NotImplementedError("op=Adasum is not implemented by Ringlet yet; use Average "
                                  "or Sum")
    base = optimizer.__class__
    cls = type(base.__name__, (_DistributedOptimizer, base), {})
    # The same object state (param groups, hyperparameters, step state and
    # hooks) under the distributed class, without re-running the wrapped
    # class's constructor and its positional arguments.
    distributed = cls.__new__(cls)
    distributed.__dict__.update(optimizer.__dict__)
    distributed._setup_distributed(named_parameters, compression, backward_passes_per_step, op,
                                   gradient_predivide_factor, groups, sparse_as_dense,
                                   process_set)
    return distributed
