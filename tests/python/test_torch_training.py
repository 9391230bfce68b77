"""The training helpers: DistributedOptimizer applies the gradient of the
whole batch on every rank, the broadcast helpers make every rank start from
the root's state, and SyncBatchNorm normalizes over every rank's batch."""

import gc
import os
import tempfile
import warnings

import pytest
import torch

from conftest import same_on_every_rank


def model_and_data(rank, seed=0):
    torch.manual_seed(seed + rank)  # a different model and batch on every rank
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(6, 4, generator=g)
    y = torch.randn(6, 1, generator=g)
    return model, x, y


def reference_step(rt, state, lr, ranks_data):
    """One SGD step on the average of every rank's gradient, in this process."""
    model, _, _ = model_and_data(0)
    model.load_state_dict(state)
    grads = None
    for x, y in ranks_data:
        model.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        g = [p.grad.clone() for p in model.parameters()]
        grads = g if grads is None else [a + b for a, b in zip(grads, g)]
    with torch.no_grad():
        for p, g in zip(model.parameters(), grads):
            p -= lr * g / len(ranks_data)
    return model.state_dict()


@pytest.mark.parametrize("variant", ["plain", "groups", "num_groups", "fp16", "predivide"])
def test_distributed_optimizer_applies_the_average_gradient(rt, variant):
    model, x, y = model_and_data(rt.rank())
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    kwargs = {}
    params = list(model.parameters())
    if variant == "groups":
        kwargs["groups"] = [params[:2], params[2:]]
    elif variant == "num_groups":
        kwargs["num_groups"] = 2
    elif variant == "fp16":
        kwargs["compression"] = rt.Compression.fp16
    elif variant == "predivide":
        kwargs["gradient_predivide_factor"] = 2.0
    # num_groups is Horovod's deprecated name for groups=N
    with pytest.warns(DeprecationWarning) if variant == "num_groups" else warnings.catch_warnings():
        opt = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                      named_parameters=model.named_parameters(), **kwargs)
    assert isinstance(opt, torch.optim.SGD)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    data = [model_and_data(r)[1:] for r in range(rt.size())]
    want = reference_step(rt, start, 0.1, data)
    tol = 1e-2 if variant == "fp16" else 1e-5
    for name, value in model.state_dict().items():
        assert torch.allclose(value, want[name], atol=tol), name
        assert same_on_every_rank(rt, value, name=f"check.{name}")


def test_backward_passes_per_step_accumulates_locally(rt):
    def passes(model, x, y):
        for half in (x[:3], x[3:]):
            torch.nn.functional.mse_loss(model(half), y[:3]).backward()

    model, x, y = model_and_data(rt.rank())
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                  named_parameters=model.named_parameters(),
                                  backward_passes_per_step=2)
    for _ in range(3):
        opt.zero_grad()
        passes(model, x, y)
        opt.step()
    # The reference, by plain torch from rank 0's start: each step applies the
    # average over the ranks of each rank's two passes summed.
    ref, _, _ = model_and_data(0)
    data = [model_and_data(r)[1:] for r in range(rt.size())]
    for _ in range(3):
        total = [torch.zeros_like(p) for p in ref.parameters()]
        for xr, yr in data:
            ref.zero_grad()
            passes(ref, xr, yr)
            total = [t + p.grad for t, p in zip(total, ref.parameters())]
        with torch.no_grad():
            for p, t in zip(ref.parameters(), total):
                p -= 0.05 * t / rt.size()
    want = ref.state_dict()
    for name, value in model.state_dict().items():
        assert torch.allclose(value, want[name], rtol=1e-5, atol=1e-6), name
        assert same_on_every_rank(rt, value, name=f"bpps.{name}")


def test_synchronize_after_a_failed_allreduce_raises_it_again_and_keeps_the_others(rt):
    # b's dtype differs between the ranks, so its allreduce fails on every
    # rank, after a's succeeded: the retry reduces b anew (and fails again),
    # without reducing a a second time (op=Sum would double it) nor tripping
    # on a's handle, synchronized already.
    a = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(3, dtype=torch.float64 if rt.rank() == 0 else torch.float32,
                    requires_grad=True)
    opt = rt.DistributedOptimizer(torch.optim.SGD([a, b], lr=1.0), op=rt.Sum,
                                  named_parameters=[("a", a), ("b", b)])
    a.grad = torch.full((2,), rt.rank() + 1.0, dtype=torch.float64)
    b.grad = torch.ones_like(b)
    for _ in range(2):
        with pytest.raises(rt.HorovodInternalError, match="'allreduce.b'"):
            opt.synchronize()
    want = sum(r + 1.0 for r in range(rt.size()))
    assert a.grad.tolist() == [want, want]


def test_optimizer_guards(rt):
    model, x, y = model_and_data(rt.rank())
    opt = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                  named_parameters=model.named_parameters())
    torch.nn.functional.mse_loss(model(x), y).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.synchronize()
    with opt.skip_synchronize():
        opt.step()
    opt.zero_grad()
    with pytest.raises(ValueError, match="unique"):
        named = list(model.named_parameters())
        rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                named_parameters=[("same", p) for _, p in named])


def test_unused_parameter_on_one_rank_does_not_hang(rt):
    torch.manual_seed(0)
    a = torch.nn.Linear(2, 1)
    b = torch.nn.Linear(2, 1)
    params = list(a.parameters()) + list(b.parameters())
    opt = rt.DistributedOptimizer(torch.optim.SGD(params, lr=0.1),
                                  named_parameters=[(f"p{i}", p) for i, p in enumerate(params)])
    x = torch.ones(3, 2)
    loss = a(x).sum() + (b(x).sum() if rt.rank() == 0 else 0.0)
    loss.backward()
    opt.step()
    for i, p in enumerate(params):
        assert same_on_every_rank(rt, p, name=f"unused.{i}")


def test_sparse_gradients(rt):
    emb = torch.nn.Embedding(10, 3, sparse=True)
    rt.broadcast_parameters(emb.state_dict(), root_rank=0)
    opt = rt.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                  named_parameters=emb.named_parameters())
    before = emb.weight.detach().clone()
    emb(torch.tensor([rt.rank(), 9])).sum().backward()
    opt.step()
    delta = before - emb.weight.detach()
    # row r was used by rank r alone, row 9 by everyone: the average gradient
    assert torch.allclose(delta[9], torch.ones(3))
    for r in range(rt.size()):
        assert torch.allclose(delta[r], torch.full((3,), 1.0 / rt.size()))


def test_broadcast_and_allgather_objects(rt):
    obj = {"rank": rt.rank(), "tensor": torch.arange(3) * rt.rank(), "text": "x" * rt.rank()}
    got = rt.broadcast_object(obj, root_rank=rt.size() - 1)
    assert got["rank"] == rt.size() - 1 and got["text"] == "x" * (rt.size() - 1)
    everyone = rt.allgather_object(obj)
    assert [o["rank"] for o in everyone] == list(range(rt.size()))
    assert all(torch.equal(o["tensor"], torch.arange(3) * r) for r, o in enumerate(everyone))


def test_sync_batch_norm_matches_batch_norm_over_the_whole_batch(rt):
    torch.manual_seed(3)
    full = torch.randn(4 * rt.size(), 3, 5)
    mine = full[4 * rt.rank():4 * (rt.rank() + 1)].clone().requires_grad_(True)
    sync = rt.SyncBatchNorm(3)
    out = sync(mine)
    (out * torch.arange(5.0)).sum().backward()

    ref = torch.nn.BatchNorm1d(3)
    whole = full.clone().requires_grad_(True)
    ref_out = ref(whole)
    (ref_out * torch.arange(5.0)).sum().backward()
    rows = slice(4 * rt.rank(), 4 * (rt.rank() + 1))
    assert torch.allclose(out, ref_out[rows], atol=1e-5)
    assert torch.allclose(mine.grad, whole.grad[rows], atol=1e-5)
    assert torch.allclose(sync.running_mean, ref.running_mean, atol=1e-6)
    assert torch.allclose(sync.running_var, ref.running_var, atol=1e-5)
    # the weight's gradient is this rank's part; summed over ranks it is the whole
    total = rt.allreduce(sync.weight.grad, op=rt.Sum)
    assert torch.allclose(total, ref.weight.grad, atol=1e-4)
    sync.eval()
    assert torch.allclose(sync(mine), ref.eval()(full[rows]), atol=1e-5)


# torch's calls that make a tensor from nothing, which alone choose a device
# (every other tensor takes its input's).
_FACTORIES = ("tensor", "as_tensor", "scalar_tensor", "zeros", "ones", "full", "empty",
              "arange", "linspace", "eye", "rand", "randn")


def test_sync_batch_norm_makes_every_tensor_on_the_inputs_device(rt, monkeypatch):
    # On the host every device is the host, so the devices SyncBatchNorm asks
    # for are checked instead: a tensor made without naming the input's device
    # lands on the host, and beside a CUDA input fails (its count once did).
    import sys

    asked = []

    def watched(name, make):
        def call(*args, **kwargs):
            if sys._getframe(1).f_code.co_filename.endswith("sync_batch_norm.py"):
                asked.append((name, kwargs.get("device")))
            return make(*args, **kwargs)
        return call

    for name in _FACTORIES:
        monkeypatch.setattr(torch, name, watched(name, getattr(torch, name)))
    x = torch.randn(4, 3, 5, requires_grad=True)
    sync = rt.SyncBatchNorm(3)
    sync(x).sum().backward()
    assert asked, "the count is made from nothing: its call should have been seen"
    assert all(d is not None and torch.device(d) == x.device for _, d in asked), asked


def test_sync_batch_norm_without_running_stats_normalizes_over_every_rank_in_eval(rt):
    # Horovod: evaluation without running statistics uses the whole batch.
    torch.manual_seed(4)
    full = torch.randn(3 * rt.size(), 2, 4)
    rows = slice(3 * rt.rank(), 3 * (rt.rank() + 1))
    sync = rt.SyncBatchNorm(2, track_running_stats=False).eval()
    ref = torch.nn.BatchNorm1d(2, track_running_stats=False).eval()
    assert torch.allclose(sync(full[rows]), ref(full)[rows], atol=1e-5)


# ------------------------------------------------ DistributedOptimizer as Horovod's

def linear_model(rank=0):
    torch.manual_seed(7)
    model = torch.nn.Linear(3, 2, bias=False).double()
    g = torch.Generator().manual_seed(20 + rank)
    return model, torch.randn(4, 3, generator=g, dtype=torch.float64), torch.randn(
        4, 2, generator=g, dtype=torch.float64)


def gradient_at(weight, x, y):
    """The gradient of the MSE loss of a bias-free linear model at `weight`, by plain torch."""
    w = weight.detach().clone().requires_grad_(True)
    torch.nn.functional.mse_loss(x @ w.t(), y).backward()
    return w.grad


def ranks_gradients(rt, weight, part=slice(None)):
    return [gradient_at(weight, linear_model(r)[1][part], linear_model(r)[2][part])
            for r in range(rt.size())]


def test_unnamed_parameters_are_named_as_in_horovod(rt):
    # allreduce.noname.<group>.<index>, which the allreduce prefixes once more
    # on the wire (and in the timeline): allreduce.allreduce.noname.0.1.
    a, b = torch.nn.Linear(2, 1), torch.nn.Linear(1, 1)
    opt = rt.DistributedOptimizer(torch.optim.SGD(
        [{"params": a.parameters()}, {"params": b.parameters(), "lr": 0.5}], lr=0.1))
    with tempfile.TemporaryDirectory() as folder:  # each rank its own; rank 0 writes
        path = os.path.join(folder, "timeline.json")
        rt.start_timeline(path)
        b(a(torch.ones(3, 2))).sum().backward()
        opt.step()
        rt.stop_timeline()
        if rt.rank() == 0:
            with open(path) as f:
                text = f.read()
            for name in ("0.0", "0.1", "1.0", "1.1"):
                assert f'"allreduce.allreduce.noname.{name}"' in text, name


def test_named_parameters_are_checked_as_in_horovod(rt):
    model, _, _ = model_and_data(rt.rank())
    named = list(model.named_parameters())

    def wrap(named_parameters):
        return rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=named_parameters)

    with pytest.raises(ValueError, match="not named") as err:
        wrap(named[:1])
    assert all(str(id(p)) in str(err.value) for _, p in named[1:])
    with pytest.raises(ValueError, match="tuples"):
        wrap([p for _, p in named])
    with pytest.raises(ValueError, match="duplicates: same"):
        wrap([("same", p) for _, p in named])


def test_step_after_synchronize_warns_and_reduces_again(rt):
    # Horovod's step() synchronizes again after a synchronize() outside
    # skip_synchronize(), and warns: with op=Sum the gradients come out
    # multiplied by the size once more.
    model, x, y = linear_model(rt.rank())
    start = model.weight.detach().clone()
    opt = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                  named_parameters=model.named_parameters(), op=rt.Sum)
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.synchronize()
    total = sum(ranks_gradients(rt, start))
    assert torch.allclose(model.weight.grad, total, rtol=1e-10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    assert len(caught) == 1
    assert "optimizer.step() called without optimizer.skip_synchronize()" in str(
        caught[0].message)
    assert torch.allclose(start - model.weight.detach(), rt.size() * total, rtol=1e-10)


def test_zero_grad_between_accumulated_passes_raises(rt):
    model, x, y = linear_model(rt.rank())
    start = model.weight.detach().clone()
    opt = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                  named_parameters=model.named_parameters(),
                                  backward_passes_per_step=2)
    torch.nn.functional.mse_loss(model(x[:2]), y[:2]).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    torch.nn.functional.mse_loss(model(x[2:]), y[2:]).backward()
    opt.step()
    passes = [a + b for a, b in zip(ranks_gradients(rt, start, slice(0, 2)),
                                    ranks_gradients(rt, start, slice(2, 4)))]
    assert torch.allclose(start - model.weight.detach(), sum(passes) / rt.size(), rtol=1e-10)


def test_set_backward_passes_per_step_and_load_state_dict_reset_the_count(rt):
    model, x, y = linear_model(rt.rank())
    opt = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                  named_parameters=model.named_parameters())
    opt.set_backward_passes_per_step(2)
    assert opt.backward_passes_per_step == 2
    torch.nn.functional.mse_loss(model(x[:2]), y[:2]).backward()
    # Loading a state forgets the pass counted: two passes again before a
    # reduction, and zero_grad() is allowed.
    opt.load_state_dict(opt.state_dict())
    opt.zero_grad()
    start = model.weight.detach().clone()
    for part in (slice(0, 2), slice(2, 4)):
        torch.nn.functional.mse_loss(model(x[part]), y[part]).backward()
    opt.step()
    passes = [a + b for a, b in zip(ranks_gradients(rt, start, slice(0, 2)),
                                    ranks_gradients(rt, start, slice(2, 4)))]
    assert torch.allclose(start - model.weight.detach(), sum(passes) / rt.size(), rtol=1e-10)


def test_a_dropped_optimizer_stops_reducing(rt):
    # Wrapping the model anew: the first optimizer's hooks go with it, as
    # Horovod's do once collected, instead of starting allreduces of the same
    # names beside the second's.
    model, x, y = linear_model(rt.rank())
    first = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                    named_parameters=model.named_parameters())
    torch.nn.functional.mse_loss(model(x), y).backward()
    first.step()
    del first
    gc.collect()
    second = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                     named_parameters=model.named_parameters())
    for _ in range(2):
        start = model.weight.detach().clone()
        second.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        second.step()
        want = sum(ranks_gradients(rt, start)) / rt.size()
        assert torch.allclose(start - model.weight.detach(), want, rtol=1e-10)


def test_optimizer_wrapped_without_grad_mode_reduces(rt):
    # Its hooks do not depend on grad mode at construction (before PyTorch
    # 2.1 they sit on the gradient accumulators, reached through a view).
    model, x, y = linear_model(rt.rank())
    start = model.weight.detach().clone()
    with torch.no_grad():
        opt = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                      named_parameters=model.named_parameters())
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    want = sum(ranks_gradients(rt, start)) / rt.size()
    assert torch.allclose(start - model.weight.detach(), want, rtol=1e-10)


def test_groups_arguments_are_checked_as_in_horovod(rt):
    model, _, _ = model_and_data(rt.rank())
    params = list(model.parameters())

    def wrap(**kwargs):
        return rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(), **kwargs)

    with pytest.warns(DeprecationWarning, match="num_groups"):
        wrap(num_groups=2)
    for bad in (0, -1, [[params[0], "x"]], [[params[0]], [params[0]]]):
        with pytest.raises(ValueError, match="groups"):
            wrap(groups=bad)


def test_groups_follow_the_first_ranks_order(rt):
    # Every rank lists the parameters in its own order; the groups are made
    # in rank 0's, so that the same parameters meet in each grouped allreduce.
    torch.manual_seed(9)
    layers = [torch.nn.Linear(2, 2, bias=False).double() for _ in range(4)]
    rt.broadcast_parameters({f"l{i}": l.weight for i, l in enumerate(layers)}, root_rank=0)
    start = [l.weight.detach().clone() for l in layers]
    order = list(range(4)) if rt.rank() % 2 == 0 else [3, 1, 2, 0]
    opt = rt.DistributedOptimizer(
        torch.optim.SGD([layers[i].weight for i in order], lr=1.0),
        named_parameters=[(f"l{i}", layers[i].weight) for i in order], groups=2)
    x = torch.full((1, 2), float(rt.rank() + 1), dtype=torch.float64)
    sum((layers[i](x) * (i + 1)).sum() for i in range(4)).backward()
    opt.step()
    mean_x = sum(r + 1 for r in range(rt.size())) / rt.size()
    for i, layer in enumerate(layers):
        want = start[i] - (i + 1) * mean_x
        assert torch.allclose(layer.weight.detach(), want, rtol=1e-12), i


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_adam_gets_sparse_gradients(rt, sparse_as_dense):
    def rows_of(rank, step):
        return torch.tensor([rank % 6, (rank + 2 + step) % 6, 5])

    def loss_of(emb, rank, step):
        return (emb(rows_of(rank, step)) * torch.tensor([1.0, 2.0, 3.0]) * (rank + 1)).sum()

    torch.manual_seed(5)
    emb = torch.nn.Embedding(6, 3, sparse=True)
    rt.broadcast_parameters(emb.state_dict(), root_rank=0)
    ref = torch.nn.Embedding(6, 3, sparse=True)
    ref.load_state_dict(emb.state_dict())
    opt = rt.DistributedOptimizer(torch.optim.SparseAdam(list(emb.parameters()), lr=0.1),
                                  named_parameters=emb.named_parameters(),
                                  sparse_as_dense=sparse_as_dense)
    ref_opt = torch.optim.SparseAdam(list(ref.parameters()), lr=0.1)
    for step in range(2):
        opt.zero_grad()
        loss_of(emb, rt.rank(), step).backward()
        opt.step()
        assert emb.weight.grad.is_sparse
        # The reference: the average of every rank's gradient, by plain torch.
        grads = []
        for r in range(rt.size()):
            ref.zero_grad()
            loss_of(ref, r, step).backward()
            grads.append(ref.weight.grad.to_dense())
        ref.weight.grad = (sum(grads) / rt.size()).to_sparse(1)
        ref_opt.step()
        assert torch.allclose(emb.weight, ref.weight, atol=1e-6), step


# ------------------------------------------------ broadcast_optimizer_state as Horovod's

def test_broadcast_optimizer_state_starts_an_empty_state_with_zero_gradients(rt):
    # Horovod's own case: a parameter that requires no gradient, and an
    # optimizer that has not stepped. Every rank takes one step with zero
    # gradients (weight decay moves the parameters), which sets .grad.
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.tensor([1, 3], dtype=torch.int32),
                                        requires_grad=False)
            self.b = torch.nn.Parameter(torch.rand(4, dtype=torch.float64))

    model = Model()
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    b0 = model.b.detach().clone()
    opt = rt.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.001, weight_decay=1e-6, momentum=0.9,
                        nesterov=True), named_parameters=model.named_parameters())
    rt.broadcast_optimizer_state(opt, root_rank=0)
    assert model.a.grad is None
    assert torch.equal(model.b.grad, torch.zeros(4, dtype=torch.float64))
    decayed = 1e-6 * b0  # the zero gradient plus the weight decay
    assert torch.allclose(opt.state[model.b]["momentum_buffer"], decayed, rtol=1e-12)
    assert torch.allclose(model.b.detach(), b0 - 0.001 * (decayed + 0.9 * decayed), rtol=1e-12)
    assert set(opt.state_dict()["state"]) == {1}


def adam_after_root_steps(steps, lr):
    """The root's model and Adam optimizer after `steps` steps on its own data."""
    model, x, y = model_and_data(0)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.8, 0.99))
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model, opt


@pytest.mark.parametrize("stepped", ["root", "others"])
def test_broadcast_optimizer_state_gives_the_roots_state(rt, stepped):
    model, x, y = model_and_data(rt.rank())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3 * (rt.rank() + 1),
                           betas=(0.8, 0.99) if rt.rank() == 0 else (0.5, 0.5))
    if (rt.rank() == 0) == (stepped == "root"):
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    rt.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 1e-3 and opt.param_groups[0]["betas"] == (0.8, 0.99)
    if stepped == "root":
        _, want = adam_after_root_steps(2, 1e-3)
        expected = [want.state[p] for p in want.param_groups[0]["params"]]
    else:  # the root had no state: its one step with zero gradients
        expected = [{"step": 1.0, "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
                    for p in model.parameters()]
    for p, want in zip(model.parameters(), expected):
        state = opt.state[p]
        assert float(state["step"]) == float(want["step"])
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.allclose(state[key], want[key], rtol=1e-6, atol=1e-12), key


def test_broadcast_optimizer_state_keeps_no_state_where_the_root_has_none(rt):
    # The root stepped with a gradient for `used` only; the others, fresh,
    # first step every parameter. After it they hold the root's state: none
    # for `unused`.
    torch.manual_seed(2)
    used, unused = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    params = list(used.parameters()) + list(unused.parameters())
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.5)
    if rt.rank() == 0:
        used(torch.ones(1, 2)).sum().backward()
        opt.step()
    rt.broadcast_optimizer_state(opt, root_rank=0)
    assert sorted(opt.state_dict()["state"]) == [0, 1]
    assert torch.equal(opt.state[used.weight]["momentum_buffer"], torch.ones(1, 2))
    assert torch.equal(opt.state[used.bias]["momentum_buffer"], torch.ones(1))


def test_broadcast_optimizer_state_of_channels_last_parameters(rt):
    # Adam's state takes its parameter's layout: channels_last, not contiguous.
    # The root keeps its values and every rank gets them.
    def conv_after_step(rank, stepped):
        torch.manual_seed(11 + rank)
        conv = torch.nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
        opt = torch.optim.Adam(conv.parameters(), lr=0.1)
        if stepped:
            batch = torch.randn(2, 3, 5, 5).to(memory_format=torch.channels_last)
            conv(batch).square().sum().backward()
            opt.step()
        return conv, opt

    conv, opt = conv_after_step(rt.rank(), stepped=rt.rank() == 0)
    rt.broadcast_optimizer_state(opt, root_rank=0)
    _, root_opt = conv_after_step(0, stepped=True)  # the root's state, by plain torch
    for p, want in zip(conv.parameters(), root_opt.param_groups[0]["params"]):
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(opt.state[p][key], root_opt.state[want][key]), key


def test_broadcast_optimizer_state_of_sparse_adam(rt):
    emb = torch.nn.Embedding(5, 2, sparse=True)
    opt = torch.optim.SparseAdam(list(emb.parameters()), lr=0.1)
    if rt.rank() == 0:
        emb(torch.tensor([1, 3])).sum().backward()
        opt.step()
    rt.broadcast_optimizer_state(opt, root_rank=0, model=emb)
    state = opt.state[emb.weight]
    assert float(state["step"]) == 1
    # The root's first moment: (1 - beta1) times the gradient, on rows 1 and 3.
    want = torch.zeros(5, 2)
    want[[1, 3]] = 0.1
    assert torch.allclose(state["exp_avg"], want, atol=1e-7)
    emb(torch.tensor([0])).sum().backward()
    opt.step()  # and it trains on


def test_broadcast_optimizer_state_gives_the_roots_hyperparameters(rt):
    # Even where the optimizer keeps no state at all.
    model, _, _ = model_and_data(rt.rank())
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (rt.rank() + 1))
    rt.broadcast_optimizer_state(opt, root_rank=rt.size() - 1)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * rt.size())


def test_broadcast_parameters_takes_a_list_of_tensors(rt):
    tensors = [torch.full((2,), float(rt.rank())), torch.full((3,), rt.rank() + 0.5)]
    rt.broadcast_parameters(tensors, root_rank=rt.size() - 1)
    assert torch.equal(tensors[0], torch.full((2,), float(rt.size() - 1)))
    assert torch.equal(tensors[1], torch.full((3,), rt.size() - 0.5))


def test_broadcast_parameters_refuses_what_is_not_a_tensor(rt):
    # As Horovod's, which fails on such an entry; here before broadcasting
    # any, so that the tensors before it are not left in flight.
    tensor = torch.full((2,), float(rt.rank()))
    with pytest.raises(ValueError, match=r"entry 'step' \(int\) is not a tensor"):
        rt.broadcast_parameters({"a": tensor, "step": 3}, root_rank=0)
    with pytest.raises(ValueError, match=r"entry at index 1 \(NoneType\) is not a tensor"):
        rt.broadcast_parameters([tensor, None], root_rank=0)
    # Nothing was started: the name the first entry had is free.
    rt.broadcast_parameters({"a": tensor}, root_rank=0)
    assert tensor.tolist() == [0.0, 0.0]


def test_broadcast_object_takes_what_cloudpickle_takes(rt):
    offset = 100 * rt.rank() + 7  # the root's closure carries its own: 7
    fn = rt.broadcast_object(lambda v: v + offset, root_rank=0)
    assert fn(1) == 8


def test_elastic_sampler_splits_what_is_left_of_the_epoch(rt):
    n, size, rank = 11, rt.size(), rt.rank()
    sampler = rt.elastic.ElasticSampler(list(range(n)), shuffle=False)

    def expected(remaining):
        per_rank = -(-len(remaining) // size)  # ceil
        padded = remaining + remaining[:per_rank * size - len(remaining)]
        return padded[rank::size]

    assert list(sampler) == expected(list(range(n)))
    assert len(sampler) == -(-n // size)
    # One batch of 2 done on every rank: 2 * size samples of the epoch are.
    sampler.record_batch(0, 2)
    assert sampler.state_dict() == {"epoch": 0, "processed_num": 2 * size}
    resumed = rt.elastic.ElasticSampler(list(range(n)), shuffle=False)
    resumed.load_state_dict(sampler.state_dict())
    assert list(resumed) == expected(list(range(2 * size, n)))
    # A new epoch starts over; shuffled orders are the same on every rank
    # and differ between epochs.
    sampler.set_epoch(1)
    assert sampler.processed_num == 0 and list(sampler) == expected(list(range(n)))
    shuffled = rt.elastic.ElasticSampler(list(range(n)), shuffle=True, seed=5)
    first = shuffled.remaining_indices
    assert sorted(first) == list(range(n)) and first != list(range(n))
    assert same_on_every_rank(rt, torch.tensor(first), "elastic_sampler.order")
    assert list(shuffled) == expected(first)
    shuffled.set_epoch(1)
    assert sorted(shuffled.remaining_indices) == list(range(n))
    assert shuffled.remaining_indices != first


def test_torch_state_keeps_an_elastic_sampler(rt):
    sampler = rt.elastic.ElasticSampler(list(range(20)), shuffle=False)
    state = rt.elastic.TorchState(sampler=sampler, epoch=0)
    sampler.record_batch(0, 1)
    state.commit()
    sampler.record_batch(1, 1)
    state.restore()
    assert sampler.processed_num == rt.size()
    # sync takes rank 0's place in the epoch.
    if rt.rank() == 0:
        sampler.record_batch(1, 1)
    state.sync()
    assert sampler.processed_num == 2 * rt.size()
