"""The training helpers: DistributedOptimizer applies the gradient of the
whole batch on every rank, the broadcast helpers make every rank start from
the root's state, and SyncBatchNorm normalizes over every rank's batch."""

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
    model, x, y = model_and_data(rt.rank())
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                  named_parameters=model.named_parameters(),
                                  backward_passes_per_step=2)
    for _ in range(3):
        opt.zero_grad()
        for half in (x[:3], x[3:]):
            torch.nn.functional.mse_loss(model(half), y[:3]).backward()
        opt.step()
    for name, value in model.state_dict().items():
        assert same_on_every_rank(rt, value, name=f"bpps.{name}")


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


def test_broadcast_optimizer_state(rt):
    model, x, y = model_and_data(rt.rank())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3 * (rt.rank() + 1))
    if rt.rank() == 0:  # only the root has stepped: others have no state yet
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    rt.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3)
    for i, p in enumerate(model.parameters()):
        assert same_on_every_rank(rt, opt.state[p]["exp_avg"], name=f"adam.{i}")


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
