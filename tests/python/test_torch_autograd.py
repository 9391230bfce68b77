"""Horovod's gradient rules, checked against what the rules give by hand: an
allreduce's gradient is the same allreduce of the incoming gradients; an
allgather's is this rank's rows of their sum; a broadcast's is their sum at
the root and zero elsewhere; an alltoall sends gradients back the way the
rows came; a reducescatter's is the allgather of the shares' gradients."""

import torch


def weight(rank):
    return float(rank + 1)


def all_weights(rt):
    return [weight(r) for r in range(rt.size())]


def test_allreduce_gradient(rt):
    for op, combine in ((rt.Average, lambda w: sum(w) / len(w)), (rt.Sum, sum)):
        x = torch.ones(3, requires_grad=True)
        (rt.allreduce(x, op=op) * weight(rt.rank())).sum().backward()
        assert torch.allclose(x.grad, torch.full((3,), combine(all_weights(rt))))


def test_grouped_allreduce_gradient(rt):
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    ya, yb = rt.grouped_allreduce([a, b], op=rt.Sum)
    (ya.sum() * weight(rt.rank()) + yb.sum() * 2 * weight(rt.rank())).backward()
    assert torch.allclose(a.grad, torch.full((2,), sum(all_weights(rt))))
    assert torch.allclose(b.grad, torch.full((3,), 2 * sum(all_weights(rt))))


def test_allgather_gradient(rt):
    rows = rt.rank() + 1
    x = torch.zeros(rows, 2, requires_grad=True)
    y = rt.allgather(x)
    # rank r weighs row i of the gathered tensor by (r + 1) * (i + 1)
    row_index = torch.arange(y.shape[0], dtype=torch.float32).unsqueeze(1) + 1
    (y * row_index * weight(rt.rank())).sum().backward()
    start = sum(r + 1 for r in range(rt.rank()))
    want = (torch.arange(start, start + rows, dtype=torch.float32) + 1).unsqueeze(1) * sum(
        all_weights(rt))
    assert torch.allclose(x.grad, want.expand(rows, 2))


def test_broadcast_gradient(rt):
    root = rt.size() - 1
    x = torch.ones(4, requires_grad=True)
    (rt.broadcast(x, root) * weight(rt.rank())).sum().backward()
    want = sum(all_weights(rt)) if rt.rank() == root else 0.0
    assert torch.allclose(x.grad, torch.full((4,), want))


def test_alltoall_gradient(rt):
    n = rt.size()
    x = torch.zeros(2 * n, 1, requires_grad=True)
    y = rt.alltoall(x)
    (y * weight(rt.rank())).sum().backward()
    # rows 2j and 2j + 1 went to rank j, which weighed them by its weight
    want = torch.tensor([weight(j) for j in range(n) for _ in range(2)]).unsqueeze(1)
    assert torch.allclose(x.grad, want)


def test_reducescatter_gradient(rt):
    n = rt.size()
    x = torch.ones(n, 2, requires_grad=True)
    for op, scale in ((rt.Sum, 1.0), (rt.Average, 1.0 / n)):
        x.grad = None
        (rt.reducescatter(x, op=op) * weight(rt.rank())).sum().backward()
        want = torch.tensor([weight(j) * scale for j in range(n)]).unsqueeze(1).expand(n, 2)
        assert torch.allclose(x.grad, want)
