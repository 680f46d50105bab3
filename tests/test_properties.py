"""Property tests over random shapes: broadcasting binary ops and reductions, against torch and a NumPy reference."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from conftest import to_numpy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import trainkit

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
RTOL, ATOL = 1e-5, 1e-6

SEEDS = st.integers(0, 2**32 - 1)
BROADCAST_PAIRS = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=4)

# op, and its partial derivatives with respect to each input, on the broadcast float64 inputs
BINARY = {
    "add": (operator.add, lambda a, b: (np.ones_like(a), np.ones_like(b))),
    "sub": (operator.sub, lambda a, b: (np.ones_like(a), -np.ones_like(b))),
    "mul": (operator.mul, lambda a, b: (b, a)),
    "div": (operator.truediv, lambda a, b: (1 / b, -a / b**2)),
    "maximum": (lambda a, b: a.maximum(b), lambda a, b: ((a > b).astype(float), (b > a).astype(float))),
}


def _operands(name: str, sa: tuple, sb: tuple, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Float32 inputs; a divisor is kept away from zero."""
    rng = np.random.default_rng(seed)
    a = np.asarray(rng.standard_normal(sa), dtype=np.float32)
    b = np.asarray(rng.standard_normal(sb), dtype=np.float32)
    if name == "div":
        b = np.asarray(np.where(b < 0, -1.0, 1.0) * rng.uniform(0.5, 2.0, sb), dtype=np.float32)
    return a, b


def _sum_back(g: np.ndarray, shape: tuple) -> np.ndarray:
    """``g`` (of the broadcast result's shape) added, element by element, into the input element it came from."""
    out = np.zeros(shape)
    lead = g.ndim - len(shape)
    for index in np.ndindex(*g.shape):
        out[tuple(0 if n == 1 else i for i, n in zip(index[lead:], shape))] += g[index]
    return out


@pytest.mark.parametrize("name", BINARY)
@SETTINGS
@given(shapes=BROADCAST_PAIRS, seed=SEEDS)
def test_binary_op_values_and_grads_match_torch(name, device, torch, shapes, seed):
    op, _ = BINARY[name]
    (sa, sb), result = shapes.input_shapes, shapes.result_shape
    a, b = _operands(name, sa, sb, seed)
    upstream = np.asarray(np.random.default_rng(seed + 1).standard_normal(result), dtype=np.float32)

    ta = trainkit.tensor(a, device=device, requires_grad=True)
    tb = trainkit.tensor(b, device=device, requires_grad=True)
    out = op(ta, tb)
    out.backward(trainkit.tensor(upstream, device=device))
    ra, rb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ref = op(ra, rb)
    ref.backward(torch.tensor(upstream))

    assert tuple(out.shape) == result
    assert out.dtype == trainkit.float32
    np.testing.assert_allclose(to_numpy(out), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    for x, r, shape in ((ta, ra, sa), (tb, rb, sb)):
        assert tuple(x.grad.shape) == shape
        assert x.grad.dtype == trainkit.float32
        np.testing.assert_allclose(to_numpy(x.grad), r.grad.numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", BINARY)
@SETTINGS
@given(shapes=BROADCAST_PAIRS, seed=SEEDS)
def test_binary_op_grads_sum_back_over_broadcast_dims(name, device, shapes, seed):
    """Each input's grad is the sum, over every output element it reached, of upstream times the partial."""
    op, partials = BINARY[name]
    (sa, sb), result = shapes.input_shapes, shapes.result_shape
    a, b = _operands(name, sa, sb, seed)
    upstream = np.random.default_rng(seed + 1).standard_normal(result)

    ta = trainkit.tensor(a, device=device, requires_grad=True)
    tb = trainkit.tensor(b, device=device, requires_grad=True)
    op(ta, tb).backward(trainkit.tensor(upstream, dtype=trainkit.float32, device=device))

    wide_a = np.broadcast_to(a.astype(np.float64), result)
    wide_b = np.broadcast_to(b.astype(np.float64), result)
    upstream = upstream.astype(np.float32).astype(np.float64)
    da, db = partials(wide_a, wide_b)
    np.testing.assert_allclose(to_numpy(ta.grad), _sum_back(upstream * da, sa), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(to_numpy(tb.grad), _sum_back(upstream * db, sb), rtol=1e-4, atol=1e-5)


@SETTINGS
@given(shapes=BROADCAST_PAIRS)
def test_add_grad_counts_how_often_each_element_is_used(device, shapes):
    (sa, sb), result = shapes.input_shapes, shapes.result_shape
    a = trainkit.ones(sa, device=device, requires_grad=True)
    b = trainkit.ones(sb, device=device, requires_grad=True)
    (a + b).sum().backward()
    n = int(np.prod(result))
    for x, shape in ((a, sa), (b, sb)):
        uses = n // max(int(np.prod(shape)), 1)
        np.testing.assert_array_equal(to_numpy(x.grad), np.full(shape, uses, dtype=np.float32))


# ------------------------------------------------------------------------------------------------- reductions
REDUCTIONS = {
    "sum": lambda x, dim, keepdim: x.sum(dim=dim, keepdim=keepdim),
    "mean": lambda x, dim, keepdim: x.mean(dim=dim, keepdim=keepdim),
    "amax": lambda x, dim, keepdim: x.amax(dim=dim, keepdim=keepdim),
    "var": lambda x, dim, keepdim: x.var(dim=dim, keepdim=keepdim),
    "var-correction0": lambda x, dim, keepdim: x.var(dim=dim, keepdim=keepdim, correction=0),
}


@st.composite
def reduction_args(draw):
    """A shape, a non-empty set of its dims (an int or a tuple, some negative), keepdim, and a seed."""
    shape = draw(array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    ndim = len(shape)
    dims = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    dims = [d - ndim if draw(st.booleans()) else d for d in dims]
    dim = dims[0] if len(dims) == 1 and draw(st.booleans()) else tuple(dims)
    return shape, dim, draw(st.booleans()), draw(SEEDS)


@pytest.mark.parametrize("name", REDUCTIONS)
@SETTINGS
@given(args=reduction_args())
def test_reduction_values_and_grads_match_torch(name, device, torch, args):
    shape, dim, keepdim, seed = args
    dims = {d % len(shape) for d in ((dim,) if isinstance(dim, int) else dim)}
    count = int(np.prod([shape[d] for d in dims]))
    if name == "var":
        assume(count > 1)
    reduce = REDUCTIONS[name]
    rng = np.random.default_rng(seed)
    data = np.asarray(rng.standard_normal(shape), dtype=np.float32)

    x = trainkit.tensor(data, device=device, requires_grad=True)
    out = reduce(x, dim, keepdim)
    xr = torch.tensor(data, requires_grad=True)
    ref = reduce(xr, dim, keepdim)
    assert tuple(out.shape) == tuple(ref.shape)
    assert out.dtype == trainkit.float32
    np.testing.assert_allclose(to_numpy(out), ref.detach().numpy(), rtol=RTOL, atol=ATOL)

    upstream = np.asarray(rng.standard_normal(tuple(ref.shape)), dtype=np.float32)
    out.backward(trainkit.tensor(upstream, device=device))
    ref.backward(torch.tensor(upstream))
    assert tuple(x.grad.shape) == shape
    assert x.grad.dtype == trainkit.float32
    np.testing.assert_allclose(to_numpy(x.grad), xr.grad.numpy(), rtol=RTOL, atol=ATOL)
