"""Horovod 0.28.1's gradient rules (horovod/torch/mpi_ops.py, its Horovod*
autograd Functions), each written out here on every rank's known incoming
gradient and compared with what backward gives:

- allreduce, grouped_allreduce: the same allreduce (op, prescale,
  postscale) of the incoming gradients;
- allgather, grouped_allgather: this rank's rows of the incoming gradients
  averaged over the ranks;
- broadcast: the incoming gradients averaged over the ranks at the root,
  times zero elsewhere;
- alltoall: the incoming gradients sent back the way the rows came;
- reducescatter, grouped_reducescatter: the allgather of the shares'
  gradients, times the set's size for Sum, times the prescale and the
  postscale.
"""

import math

import pytest
import torch


def upstream(rank, shape):
    """The gradient rank `rank` feeds into backward: exact in float64, different on every
    rank and every element, so that mixed-up rows or ranks show."""
    n = math.prod(shape)
    return ((torch.arange(n, dtype=torch.float64) % 5) + 1 + 2 * rank).reshape(shape) / 4


def backward_with_upstream(rt, y):
    (y * upstream(rt.rank(), tuple(y.shape))).sum().backward()


def leaf(shape, rank):
    return (torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape) + rank
            ).requires_grad_(True)


def share_rows(rows, n):
    """Horovod's even split of `rows` over `n` members, the first ones one row more."""
    return [rows // n + (1 if i < rows % n else 0) for i in range(n)]


@pytest.mark.parametrize("op,scales", [("Sum", (1.0, 1.0)), ("Average", (1.0, 1.0)),
                                       ("Sum", (0.5, 3.0)), ("Average", (0.5, 3.0)),
                                       ("Max", (1.0, 1.0))])
def test_allreduce_gradient(rt, op, scales):
    n, shape = rt.size(), (3, 2)
    x = leaf(shape, rt.rank())
    y = rt.allreduce(x, op=getattr(rt, op), prescale_factor=scales[0],
                     postscale_factor=scales[1])
    backward_with_upstream(rt, y)
    grads = torch.stack([upstream(r, shape) for r in range(n)])
    if op == "Max":
        want = grads.max(0).values
    else:
        want = grads.sum(0) * scales[0] * scales[1] / (n if op == "Average" else 1)
    assert torch.allclose(x.grad, want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_grouped_allreduce_gradient(rt, op):
    n = rt.size()
    shapes = [(2,), (3, 2)]
    xs = [leaf(s, rt.rank()) for s in shapes]
    ys = rt.grouped_allreduce(xs, op=getattr(rt, op), prescale_factor=2.0,
                              postscale_factor=0.25)
    assert isinstance(ys, list) and len(ys) == 2
    (sum((y * upstream(rt.rank(), s) * (i + 1)).sum()
         for i, (y, s) in enumerate(zip(ys, shapes)))).backward()
    for i, (x, s) in enumerate(zip(xs, shapes)):
        total = sum(upstream(r, s) * (i + 1) for r in range(n))
        want = total * 2.0 * 0.25 / (n if op == "Average" else 1)
        assert torch.allclose(x.grad, want, rtol=1e-12, atol=0)


def test_grouped_allreduce_gradient_of_one_output(rt):
    # The outputs backward does not reach get zero gradients.
    a, b = leaf((2,), rt.rank()), leaf((2,), rt.rank())
    ya, _ = rt.grouped_allreduce([a, b], op=rt.Sum)
    ya.sum().backward()
    assert torch.equal(a.grad, torch.full((2,), float(rt.size()), dtype=torch.float64))
    assert torch.equal(b.grad, torch.zeros(2, dtype=torch.float64))


def test_allgather_gradient(rt):
    n = rt.size()
    rows = [r + 1 for r in range(n)]  # ranks differ in dimension 0
    x = leaf((rows[rt.rank()], 2), rt.rank())
    y = rt.allgather(x)
    backward_with_upstream(rt, y)
    averaged = sum(upstream(r, (sum(rows), 2)) for r in range(n)) / n
    start = sum(rows[:rt.rank()])
    assert torch.allclose(x.grad, averaged[start:start + rows[rt.rank()]], rtol=1e-12, atol=0)


def test_allgather_gradient_of_ones_is_one(rt):
    # Every rank feeds ones: their average is one (a sum would give the size).
    x = torch.zeros(1, 2, requires_grad=True)
    rt.allgather(x).sum().backward()
    assert torch.equal(x.grad, torch.ones(1, 2))


def test_grouped_allgather_gradient(rt):
    n = rt.size()
    rows = [[r + 1 for r in range(n)], [2 * (n - r) for r in range(n)]]
    xs = [leaf((rows[0][rt.rank()], 2), rt.rank()), leaf((rows[1][rt.rank()],), rt.rank())]
    ys = rt.grouped_allgather(xs)
    assert isinstance(ys, tuple) and len(ys) == 2
    (sum((y * upstream(rt.rank(), tuple(y.shape)) * (i + 1)).sum()
         for i, y in enumerate(ys))).backward()
    for i, (x, counts) in enumerate(zip(xs, rows)):
        shape = (sum(counts),) + tuple(x.shape[1:])
        averaged = sum(upstream(r, shape) * (i + 1) for r in range(n)) / n
        start = sum(counts[:rt.rank()])
        assert torch.allclose(x.grad, averaged[start:start + counts[rt.rank()]], rtol=1e-12,
                              atol=0)


def test_broadcast_gradient(rt):
    n = rt.size()
    grads = []  # every root's first, so that no rank stops before the others
    for root in range(n):
        x = leaf((4,), rt.rank())
        backward_with_upstream(rt, rt.broadcast(x, root))
        grads.append(x.grad)
    averaged = sum(upstream(r, (4,)) for r in range(n)) / n
    for root, grad in enumerate(grads):
        want = averaged if rt.rank() == root else torch.zeros(4, dtype=torch.float64)
        assert torch.allclose(grad, want, rtol=1e-12, atol=0), root


def test_broadcast_gradient_elsewhere_is_times_zero(rt):
    # The non-roots' gradient is the average times zero: an infinite
    # incoming gradient makes it NaN there, as in Horovod.
    x = torch.zeros(2, requires_grad=True)
    y = rt.broadcast(x, 0)
    (y * torch.tensor([math.inf if rt.rank() == 0 else 1.0, 1.0])).sum().backward()
    if rt.rank() == 0:
        assert x.grad[0].item() == math.inf and x.grad[1].item() == 1.0
    else:
        assert math.isnan(x.grad[0].item()) and x.grad[1].item() == 0.0


def test_alltoall_gradient(rt):
    n, me = rt.size(), rt.rank()
    sends = [[(src + dst) % 2 + 1 for dst in range(n)] for src in range(n)]  # rows src -> dst
    x = leaf((sum(sends[me]), 2), me)
    y, received = rt.alltoall(x, splits=sends[me])
    assert received.tolist() == [sends[src][me] for src in range(n)]
    backward_with_upstream(rt, y)
    # The rows this rank sent to dst come back with dst's gradient of them:
    # dst's block from this rank starts after the blocks of the ranks before.
    parts = []
    for dst in range(n):
        grad_at_dst = upstream(dst, (sum(sends[src][dst] for src in range(n)), 2))
        start = sum(sends[src][dst] for src in range(me))
        parts.append(grad_at_dst[start:start + sends[me][dst]])
    assert torch.equal(x.grad, torch.cat(parts))


def test_alltoall_gradient_of_rows_not_sent_is_zero(rt):
    n, me = rt.size(), rt.rank()
    x = leaf((n + 2, 2), me)  # one row to each rank; the last two stay
    y, _ = rt.alltoall(x, splits=[1] * n)
    backward_with_upstream(rt, y)
    sent = torch.cat([upstream(dst, (n, 2))[me:me + 1] for dst in range(n)])
    assert torch.equal(x.grad, torch.cat([sent, torch.zeros(2, 2, dtype=torch.float64)]))


def test_alltoall_gradient_even_split(rt):
    n, me = rt.size(), rt.rank()
    x = leaf((2 * n,), me)
    y = rt.alltoall(x)
    assert isinstance(y, torch.Tensor)
    backward_with_upstream(rt, y)
    want = torch.cat([upstream(dst, (2 * n,))[2 * me:2 * me + 2] for dst in range(n)])
    assert torch.equal(x.grad, want)


@pytest.mark.parametrize("op,scales", [("Sum", (1.0, 1.0)), ("Average", (1.0, 1.0)),
                                       ("Sum", (0.5, 3.0)), ("Average", (2.0, 0.25))])
def test_reducescatter_gradient(rt, op, scales):
    n = rt.size()
    rows = 2 * n + 1  # uneven: the first member gets one row more
    shares = share_rows(rows, n)
    x = leaf((rows, 2), rt.rank())
    y = rt.reducescatter(x, op=getattr(rt, op), prescale_factor=scales[0],
                         postscale_factor=scales[1])
    assert tuple(y.shape) == (shares[rt.rank()], 2)
    backward_with_upstream(rt, y)
    factor = (n if op == "Sum" else 1) * scales[0] * scales[1]
    want = torch.cat([upstream(r, (shares[r], 2)) for r in range(n)]) * factor
    assert torch.allclose(x.grad, want, rtol=1e-12, atol=0)


def test_reducescatter_gradient_of_ones(rt):
    # Sum gives the size, Average one.
    n = rt.size()
    for op, want in ((rt.Sum, float(n)), (rt.Average, 1.0)):
        x = torch.zeros(n, 3, requires_grad=True)
        rt.reducescatter(x, op=op).sum().backward()
        assert torch.equal(x.grad, torch.full((n, 3), want))


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_grouped_reducescatter_gradient(rt, op):
    n = rt.size()
    shapes = [(n, 2), (2 * n + 1,)]
    xs = [leaf(s, rt.rank()) for s in shapes]
    ys = rt.grouped_reducescatter(xs, op=getattr(rt, op), postscale_factor=3.0)
    assert isinstance(ys, list) and len(ys) == 2
    (sum((y * upstream(rt.rank(), tuple(y.shape))).sum() for y in ys)).backward()
    factor = (n if op == "Sum" else 1) * 3.0
    for x, s in zip(xs, shapes):
        shares = share_rows(s[0], n)
        want = torch.cat([upstream(r, (shares[r],) + s[1:]) for r in range(n)]) * factor
        assert torch.allclose(x.grad, want, rtol=1e-12, atol=0)


def test_gradients_within_a_process_set(rt):
    # The set of ranks 1..n-1: the offsets and the size are the set's, not
    # the world's (its first member is rank 1).
    n = rt.size()
    members = list(range(1, n))
    ps = rt.add_process_set(members)
    try:
        if rt.rank() in members:
            index, m = members.index(rt.rank()), len(members)
            rows = [i + 1 for i in range(m)]
            x = leaf((rows[index], 2), rt.rank())
            y = rt.allgather(x, process_set=ps)
            backward_with_upstream(rt, y)
            averaged = sum(upstream(r, (sum(rows), 2)) for r in members) / m
            start = sum(rows[:index])
            assert torch.allclose(x.grad, averaged[start:start + rows[index]], rtol=1e-12,
                                  atol=0)

            z = leaf((m, 2), rt.rank())
            backward_with_upstream(rt, rt.reducescatter(z, op=rt.Sum, process_set=ps))
            want = torch.cat([upstream(r, (1, 2)) for r in members]) * m
            assert torch.allclose(z.grad, want, rtol=1e-12, atol=0)
    finally:
        rt.remove_process_set(ps)
