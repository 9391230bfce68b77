"""prescale_factor, postscale_factor and Average give Horovod's numbers, exactly.

Horovod (0.28.1, on the CPU) runs an Average as a Sum whose postscale it divides
by the process set's size, in double; it scales the input before the reduction
and the result after it, each only where the factor is not 1.0, as
``out = factor * in``: for integers the factor is a double and the product is
converted back toward zero; float32 and float16 multiply in float by the factor
rounded to float; float64 in double. bfloat16 is computed in float as float16 is.

The expected values here are worked out from every rank's known input with
Python floats (IEEE doubles) and math.trunc for integers, numpy float32/float16
arithmetic for floats, and torch's float32 -> bfloat16 rounding. The inputs keep
every reduction exact in any order (float sums over ranks are exact; products
stay small), so the results do not depend on the algorithm's order."""

import math
import struct

import numpy as np
import pytest
import torch

# torch.uint16 exists from PyTorch 2.3; the suite also runs on older ones.
_UINT16 = [torch.uint16] if hasattr(torch, "uint16") else []
INTEGERS = [torch.int8, torch.uint8, torch.int16] + _UINT16 + [torch.int32, torch.int64]
FLOATS = [torch.float16, torch.float32, torch.float64, torch.bfloat16]
DTYPES = INTEGERS + FLOATS
UNSIGNED = tuple([torch.uint8] + _UINT16)

# (prescale, postscale): factors whose truncation and rounding part ways, and
# whose products keep an int8 result in range (|x| <= 10 on 3 ranks).
PAIRS = [(1.0, 1.0), (0.5, 1.0), (1.0, 1.5), (2.5, 1.0), (1 / 3, 0.7), (0.7, 1 / 3),
         (1.5, 2.5), (2.5, 1.5)]
# Products: inputs in [-2, 2] and factors that keep |product| small.
PRODUCT_PAIRS = [(1.0, 1.0), (1.5, 1.0), (1.0, 0.7), (0.7, 1 / 3), (1.5, 0.5)]
# Prescales that leave a float input exact (multiples of 1/2); the others get
# the sparse input (one nonzero rank per element), whose sum is exact too.
EXACT_PRESCALES = (1.0, 0.5, 1.5, 2.5)

RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int16: (-32768, 32767),
          torch.int32: (-2 ** 31, 2 ** 31 - 1), torch.int64: (-2 ** 63, 2 ** 63 - 1)}
RANGES.update({t: (0, 65535) for t in _UINT16})


# ---------------------------------------------------------------- rounding

def f32(x):
    return float(np.float32(x))


def to_storage(dtype, x):
    """x (a float value) rounded to dtype, as the kernels round a float result."""
    if dtype == torch.float64:
        return x
    if dtype == torch.float32:
        return f32(x)
    if dtype == torch.float16:
        return float(np.float16(np.float32(x)))
    return bf16(x)


def bf16(x):
    """x rounded to float32, then to bfloat16 to nearest, ties to even (as
    torch converts): the upper 16 bits of the float32 after adding half a unit
    of the dropped 16, plus one where the kept part is odd. Worked on the bits,
    since a tensor per element made this suite spend most of its time here."""
    (bits,) = struct.unpack("<I", struct.pack("<f", f32(x)))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    (value,) = struct.unpack("<f", struct.pack("<I", bits))
    return value


def scale(dtype, x, factor):
    """Horovod's ScaleBuffer of one element (only called where factor != 1.0)."""
    if not dtype.is_floating_point:
        r = math.trunc(float(x) * factor)
        lo, hi = RANGES[dtype]
        assert lo <= r <= hi, "the test's inputs must keep results in range"
        return r
    if dtype == torch.float64:
        return x * factor
    return to_storage(dtype, float(np.float32(x) * np.float32(factor)))


def maybe_scale(dtype, x, factor):
    return x if factor == 1.0 else scale(dtype, x, factor)


# ---------------------------------------------------------------- inputs

def input_values(dtype, op, rank, n, count, prescale):
    """Rank `rank`'s input, as Python numbers exact in dtype."""
    values = []
    sparse = dtype.is_floating_point and prescale not in EXACT_PRESCALES
    for i in range(count):
        if op == "Product":
            v = (i * 3 + rank) % 5 - 2
            if dtype in UNSIGNED:
                v = abs(v)
        elif sparse:
            v = ((i * 7) % 23 - 11) * 0.37 + 0.013 if i % n == rank else 0.0
        else:
            v = (i * 7 + rank * 5) % 21 - 10
            if dtype in UNSIGNED:
                v = abs(v)
        values.append(to_storage(dtype, float(v)) if dtype.is_floating_point else v)
    return values


def as_tensor(values, dtype, shape):
    if dtype.is_floating_point:
        return torch.tensor(values, dtype=torch.float64).to(dtype).reshape(shape)
    return torch.tensor(values, dtype=torch.int64).to(dtype).reshape(shape)


def as_list(tensor):
    wide = torch.float64 if tensor.dtype.is_floating_point else torch.int64
    return tensor.to(wide).reshape(-1).tolist()


def horovod_result(dtype, op, n, inputs, prescale, postscale):
    """Horovod's result from every rank's input: scale(post', op(scale(pre, x)))."""
    scaled = [[maybe_scale(dtype, x, prescale) for x in xs] for xs in inputs]
    out = []
    for column in zip(*scaled):
        if op in ("Sum", "Average"):
            acc = sum(column)
        elif op == "Min":
            acc = min(column)
        elif op == "Max":
            acc = max(column)
        else:
            acc = math.prod(column)
        if dtype.is_floating_point:
            assert to_storage(dtype, acc) == acc, "the test's inputs must keep the reduction exact"
        else:
            lo, hi = RANGES[dtype]
            assert lo <= acc <= hi, "the test's inputs must keep the reduction in range"
        factor = postscale / n if op == "Average" else postscale
        out.append(maybe_scale(dtype, acc, factor))
    return out


def pairs_for(op, dtype):
    if op != "Product":
        return PAIRS
    if dtype.is_floating_point:  # a product of inexact floats depends on its order
        return [(pre, post) for pre, post in PRODUCT_PAIRS if pre in EXACT_PRESCALES]
    return PRODUCT_PAIRS


def rows_of(rank, n, rows):
    """The rows [start, end) of a reducescatter's result that `rank` receives."""
    share = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(share[:rank])
    return start, start + share[rank]


# ---------------------------------------------------------------- fixtures

@pytest.fixture(params=["auto", "ring"])
def rt_any(request, monkeypatch):
    """ringlet.torch under the algorithm table's choice, then with every
    allreduce and reducescatter forced onto the ring."""
    monkeypatch.setenv("RINGLET_ALGORITHM", request.param)
    import ringlet.torch as hvd
    hvd.init()
    yield hvd
    hvd.barrier()
    hvd.shutdown()


def _id(value):
    return str(value).replace("torch.", "")


# Small tensors take the one-step path, larger ones the direct one (auto).
SHAPES = [(2, 15), (257, 13)]


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("op", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce(rt_any, dtype, op):
    hvd, n, me = rt_any, rt_any.size(), rt_any.rank()
    for shape in SHAPES:
        count = math.prod(shape)
        for pre, post in pairs_for(op, dtype):
            inputs = [input_values(dtype, op, r, n, count, pre) for r in range(n)]
            want = horovod_result(dtype, op, n, inputs, pre, post)
            x = as_tensor(inputs[me], dtype, shape)
            out = hvd.allreduce(x, op=getattr(hvd, op), prescale_factor=pre,
                                postscale_factor=post, name="scaled")
            assert out.dtype == dtype
            assert as_list(out) == want, (shape, pre, post)
            y = x.clone()
            hvd.allreduce_(y, op=getattr(hvd, op), prescale_factor=pre, postscale_factor=post,
                           name="scaled_in_place")
            assert as_list(y) == want, (shape, pre, post, "in place")


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("op", ["Sum", "Average", "Max"])
def test_grouped_allreduce(rt_any, dtype, op):
    # One fused message: the window algorithms' segments, or the ring's
    # fusion buffer.
    hvd, n, me = rt_any, rt_any.size(), rt_any.rank()
    shapes = [(3,), (40, 3), (2, 2), (211, 9)]
    for pre, post in pairs_for(op, dtype):
        inputs = [[input_values(dtype, op, r, n, math.prod(s), pre) for r in range(n)]
                  for s in shapes]
        xs = [as_tensor(ins[me], dtype, s) for ins, s in zip(inputs, shapes)]
        outs = hvd.grouped_allreduce(xs, op=getattr(hvd, op), prescale_factor=pre,
                                     postscale_factor=post, name="group")
        for k, (ins, out) in enumerate(zip(inputs, outs)):
            assert as_list(out) == horovod_result(dtype, op, n, ins, pre, post), (k, pre, post)


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_reducescatter(rt_any, dtype, op):
    hvd, n, me = rt_any, rt_any.size(), rt_any.rank()
    for rows, width in [(7, 3), (301, 11)]:
        for pre, post in pairs_for(op, dtype):
            inputs = [input_values(dtype, op, r, n, rows * width, pre) for r in range(n)]
            full = horovod_result(dtype, op, n, inputs, pre, post)
            start, end = rows_of(me, n, rows)
            out = hvd.reducescatter(as_tensor(inputs[me], dtype, (rows, width)),
                                    op=getattr(hvd, op), prescale_factor=pre,
                                    postscale_factor=post, name="rs")
            assert out.shape == (end - start, width)
            assert as_list(out) == full[start * width:end * width], (rows, pre, post)


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_grouped_reducescatter(rt_any, dtype, op):
    hvd, n, me = rt_any, rt_any.size(), rt_any.rank()
    shapes = [(5, 2), (64, 7)]
    for pre, post in pairs_for(op, dtype):
        inputs = [[input_values(dtype, op, r, n, math.prod(s), pre) for r in range(n)]
                  for s in shapes]
        xs = [as_tensor(ins[me], dtype, s) for ins, s in zip(inputs, shapes)]
        outs = hvd.grouped_reducescatter(xs, op=getattr(hvd, op), prescale_factor=pre,
                                         postscale_factor=post, name="grs")
        for ins, s, out in zip(inputs, shapes, outs):
            full = horovod_result(dtype, op, n, ins, pre, post)
            start, end = rows_of(me, n, s[0])
            width = s[1]
            assert as_list(out) == full[start * width:end * width], (s, pre, post)


def _divide_then_scale(total, n, post):
    """The rule the inputs below are chosen to tell apart from Horovod's: the sum
    divided toward zero, then scaled and rounded to nearest (ties to even)."""
    return round(int(total / n) * post)


def test_average_with_postscale_rounds_once(rt_any):
    # Sum 39 over 2 ranks with postscale 1.5: Horovod truncates 39 * 0.75 =
    # 29.25 to 29, where dividing first and then scaling gives 19 * 1.5 -> 28.
    # Over 3 ranks, sum 40 with postscale 2.25: 40 * 0.75 = 30, against
    # 13 * 2.25 = 29.25 -> 29.
    hvd, n, me = rt_any, rt_any.size(), rt_any.rank()
    total, post = (39, 1.5) if n == 2 else (40, 2.25)
    mine = total // n + (1 if me < total % n else 0)
    want = math.trunc(total * (post / n))
    assert want != _divide_then_scale(total, n, post)
    for dtype in INTEGERS:
        x = torch.full((4,), mine, dtype=dtype)
        out = hvd.allreduce(x, op=hvd.Average, postscale_factor=post, name="avg")
        assert as_list(out) == [want] * 4, dtype
        rs = hvd.reducescatter(torch.full((n, 2), mine, dtype=dtype), op=hvd.Average,
                               postscale_factor=post, name="avg_rs")
        assert as_list(rs) == [want] * 2, dtype


def test_prescale_truncates_toward_zero(rt_any):
    # 11 x 2.5 = 27.5 is 27 in Horovod (rounding to nearest would give 28),
    # -11 x 2.5 is -27.
    hvd, n = rt_any, rt_any.size()
    for dtype in [torch.int8, torch.int16, torch.int32, torch.int64]:
        x = torch.tensor([11, -11, 3, -3], dtype=dtype)
        out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.5, name="pre")
        assert as_list(out) == [27 * n, -27 * n, 7 * n, -7 * n], dtype


def test_numpy_layer_shares_the_rule(rn):
    n, me = rn.size(), rn.rank()
    inputs = [[(i * 7 + r * 5) % 21 - 10 for i in range(12)] for r in range(n)]
    x = np.array(inputs[me], dtype=np.int32)
    out = rn.allreduce(x, op=rn.Average, prescale_factor=1.5, postscale_factor=0.7)
    want = horovod_result(torch.int32, "Average", n, inputs, 1.5, 0.7)
    assert out.dtype == np.int32 and out.tolist() == want
    y = np.array([to_storage(torch.float16, v) for v in inputs[me]], dtype=np.float16)
    out = rn.allreduce(y, op=rn.Sum, prescale_factor=2.5, postscale_factor=1 / 3)
    want = horovod_result(torch.float16, "Sum", n,
                          [[float(v) for v in xs] for xs in inputs], 2.5, 1 / 3)
    assert out.dtype == np.float16 and out.astype(np.float64).tolist() == want
