"""Indexing, sorting, scans, products, norms and einsum: finite-difference checks (float64) and PyTorch parity
(float32 values, gradients and node names) on the ``device`` fixture, plus errors and non-differentiable results."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy
from test_ops_gradcheck import Lib

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck, ops

MODULES = (
    ops.gather_scatter,
    ops.masking,
    ops.rearrange,
    ops.triangular,
    ops.sorting,
    ops.cumulative,
    ops.norm,
    ops.einsum,
)
ix = SimpleNamespace(**{name: getattr(module, name) for module in MODULES for name in module.__all__})

INF = float("inf")
IDX = np.array([[0, 2, 1, 0], [2, 2, 0, 1]])


def _distinct(shape, rng):
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n / 2) * 0.25 + rng.uniform(0.0, 0.05, n)).reshape(shape)


# id -> (function of (lib module wrapper, *inputs), input shapes, kind, gradgrad)
CASES = {
    "gather-dim0": (lambda m, x: ix.gather(x, 0, m.const(IDX)) if m.tk else m.gather(x, 0, m.const(IDX)), [(3, 4)]),
    "gather-dim1-small": (lambda m, x: m.f("gather")(x, 1, m.const(IDX[:, :2])), [(3, 4)]),
    "take_along_dim": (lambda m, x: m.f("take_along_dim")(x, m.const(IDX[:, :3].T), 1), [(3, 4)]),
    "take_along_dim-flat": (lambda m, x: m.f("take_along_dim")(x, m.const(np.array([5, 0, 5]))), [(3, 4)]),
    "scatter-src": (lambda m, x, s: m.f("scatter")(x, 0, m.const(np.array([[0, 2, 1, 0]])), s), [(3, 4), (1, 4)]),
    "scatter-value": (lambda m, x: m.f("scatter")(x, 1, m.const(np.array([[0], [3], [1]])), 1.5), [(3, 4)]),
    "scatter_add": (lambda m, x, s: m.f("scatter_add")(x, 0, m.const(IDX), s), [(3, 4), (2, 4)]),
    "index_select": (lambda m, x: m.f("index_select")(x, 1, m.const(np.array([3, 0, 3]))), [(3, 4)]),
    "masked_fill": (lambda m, x: m.f("masked_fill")(x, m.const(IDX[0] > 0), -2.0), [(3, 4)]),
    "masked_fill-tensor": (lambda m, x, v: m.f("masked_fill")(x, m.const(IDX[:1] > 0), v), [(3, 4), ()]),
    "masked_select": (lambda m, x: m.f("masked_select")(x, m.const(IDX[0] > 0)), [(3, 4)]),
    "narrow": (lambda m, x: m.f("narrow")(x, 1, 1, 2), [(3, 4)]),
    "select": (lambda m, x: m.f("select")(x, 1, -1), [(3, 4)]),
    "repeat": (lambda m, x: m.method(x, "repeat", 2, 1, 3), [(3, 4)]),
    "tile": (lambda m, x: m.f("tile")(x, (2,)), [(3, 4)]),
    "flip": (lambda m, x: m.f("flip")(x, (0, 1)), [(3, 4)]),
    "roll": (lambda m, x: m.f("roll")(x, (1, -2), (0, 1)), [(3, 4)]),
    "roll-flat": (lambda m, x: m.f("roll")(x, 5), [(3, 4)]),
    "tril": (lambda m, x: m.f("tril")(x), [(2, 3, 4)]),
    "triu-offset": (lambda m, x: m.f("triu")(x, 1), [(3, 4)]),
    "diag-embed": (lambda m, v: m.f("diag")(v, -1), [(4,)]),
    "diag-diagonal": (lambda m, x: m.f("diag")(x, 1), [(3, 4)]),
    "movedim": (lambda m, x: m.f("movedim")(x, (0, 2), (2, 0)), [(2, 3, 4)]),
    "topk": (lambda m, x: tuple(m.f("topk")(x, 2, 0)), [(3, 4)], "distinct"),
    "topk-smallest": (lambda m, x: tuple(m.f("topk")(x, 3, largest=False)), [(3, 4)], "distinct"),
    "sort": (lambda m, x: tuple(m.f("sort")(x, 0, descending=True)), [(3, 4)], "distinct"),
    "sort-last": (lambda m, x: tuple(m.f("sort")(x)), [(3, 4)], "distinct"),
    "cumsum": (lambda m, x: m.f("cumsum")(x, 1), [(3, 4)], "normal", True),
    "cumprod": (lambda m, x: m.f("cumprod")(x, 0), [(3, 4)], "normal", True),
    "cumprod-zeros": (lambda m, x: m.f("cumprod")(x * m.const(IDX[:1] != 0), 1), [(3, 4)], "normal", True),
    "prod": (lambda m, x: m.f("prod")(x), [(3, 4)], "normal", True),
    "prod-dim": (lambda m, x: m.f("prod")(x, 1, keepdim=True), [(3, 4)]),
    "prod-zero": (lambda m, x: m.f("prod")(x * m.const(IDX[0] != 2), 1), [(3, 4)], "normal", True),
    "norm": (lambda m, x: m.f("norm")(x), [(3, 4)], "normal", True),
    "norm-p1-dim": (lambda m, x: m.f("norm")(x, 1, 0), [(3, 4)], "distinct"),
    "norm-inf": (lambda m, x: m.f("norm")(x, INF, 1, True), [(3, 4)], "distinct"),
    "norm-fro-dims": (lambda m, x: m.f("norm")(x, "fro", (0, 2)), [(2, 3, 4)]),
    "norm-p3": (lambda m, x: m.f("norm")(x, 3), [(3, 4)], "distinct"),
    "dist": (lambda m, x, y: m.f("dist")(x, y), [(3, 4), (4,)]),
    "dist-p1": (lambda m, x, y: m.f("dist")(x, y, 1), [(3, 4), (3, 4)], "distinct"),
    "outer": (lambda m, a, b: m.f("outer")(a, b), [(3,), (4,)]),
    "einsum-matmul": (lambda m, a, b: m.f("einsum")("ij,jk->ik", a, b), [(3, 4), (4, 2)], "normal", True),
    "einsum-implicit": (lambda m, a, b: m.f("einsum")("ij,kj", a, b), [(3, 4), (2, 4)]),
    "einsum-sum": (lambda m, a: m.f("einsum")("ij->", a), [(3, 4)]),
    "einsum-trace": (lambda m, a: m.f("einsum")("ii->i", a), [(3, 3)]),
    "einsum-three": (lambda m, a, b, c: m.f("einsum")("i,ij,jk->k", a, b, c), [(3,), (3, 4), (4, 2)]),
}

# Node names that differ on purpose: PyTorch records einsum as the views, permutes and bmm it lowers to.
NAME_DIFFERENCES: set = set()


class M(Lib):
    """``Lib`` with the module's functions: trainkit's from ``indexing``, torch's from torch."""

    tk = False

    def __init__(self, module, device="cpu"):
        super().__init__(module, device)
        self.tk = module is trainkit

    def f(self, name):
        return getattr(ix, name) if self.tk else getattr(self.module, name)

    def method(self, x, name, *args):
        return getattr(ix, name)(x, *args) if self.tk else getattr(x, name)(*args)


def _spec(case):
    fn, shapes, *rest = case
    kind = rest[0] if rest else "normal"
    gradgrad = rest[1] if len(rest) > 1 else False
    return fn, shapes, kind, gradgrad


def _values(shapes, kind, rng):
    return [(_distinct(s, rng) if kind == "distinct" else rng.standard_normal(s)).astype(np.float64) for s in shapes]


def _outs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _float_out(fn):
    return lambda *xs: tuple(o for o in _outs(fn(*xs)) if o.is_floating_point())


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck(name, device, rng):
    fn, shapes, kind, gradgrad = _spec(CASES[name])
    m = M(trainkit, device)
    inputs = [trainkit.tensor(v, device=device, requires_grad=True) for v in _values(shapes, kind, rng)]
    f = _float_out(lambda *xs: fn(m, *xs))
    assert gradcheck(f, inputs)
    if gradgrad:
        assert gradgradcheck(f, inputs)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name, device, torch, rng):
    fn, shapes, kind, _ = _spec(CASES[name])
    values = [v.astype(np.float32) for v in _values(shapes, kind, rng)]
    tk_in = [trainkit.tensor(v, device=device, requires_grad=True) for v in values]
    th_in = [torch.tensor(v, requires_grad=True) for v in values]
    tk_out, th_out = _outs(fn(M(trainkit, device), *tk_in)), _outs(fn(M(torch), *th_in))
    assert len(tk_out) == len(th_out)
    for o, r in zip(tk_out, th_out):
        assert tuple(o.shape) == tuple(r.shape)
        assert str(o.dtype).rsplit(".")[-1] == str(r.dtype).rsplit(".")[-1]
        np.testing.assert_allclose(to_numpy(o), r.detach().numpy(), rtol=1e-5, atol=1e-6)
        if name not in NAME_DIFFERENCES:
            got = None if o.grad_fn is None else type(o.grad_fn).__name__
            want = None if r.grad_fn is None else type(r.grad_fn).__name__
            assert got == want
    pairs = [(o, r) for o, r in zip(tk_out, th_out) if r.requires_grad]
    ups = [rng.standard_normal(tuple(r.shape)).astype(np.float32) for _, r in pairs]
    trainkit.autograd.backward([o for o, _ in pairs], [trainkit.tensor(g, device=device) for g in ups])
    torch.autograd.backward([r for _, r in pairs], [torch.tensor(g) for g in ups])
    for x, xr in zip(tk_in, th_in):
        assert x.grad is not None
        assert str(x.grad.dtype).endswith("float32")
        np.testing.assert_allclose(to_numpy(x.grad), xr.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_cumprod_and_prod_grads_with_several_zeros(torch):
    v = np.array([[2.0, 0.0, 3.0, 0.0, 1.5], [0.0, 1.0, -2.0, 4.0, 0.5]], dtype=np.float32)
    for fn in (lambda t: t.cumprod(1), lambda t: t.prod(1), lambda t: t.prod()):
        x, xr = trainkit.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
        name = fn.__code__.co_names[0]
        out = ix.cumprod(x, 1) if name == "cumprod" else ix.prod(x, 1) if fn(xr).ndim else ix.prod(x)
        out.sum().backward()
        fn(xr).sum().backward()
        np.testing.assert_allclose(to_numpy(x.grad), xr.grad.numpy(), rtol=1e-6)


INT_RESULTS = {
    "nonzero": lambda m, x: m.f("nonzero")(x > 0),
    "argsort": lambda m, x: m.f("argsort")(x, 0, descending=True),
    "argsort-stable": lambda m, x: m.f("argsort")(m.const(IDX).float(), stable=True),
    "sort-indices": lambda m, x: m.f("sort")(x, stable=True)[1],
    "topk-indices": lambda m, x: m.f("topk")(x, 2).indices,
    "cumsum-int": lambda m, x: m.f("cumsum")((x > 0).long(), 0) if m.tk is False else ix.cumsum(x > 0, 0),
    "prod-int": lambda m, x: m.f("prod")(m.const(IDX) + 1, 1),
    "cumprod-int": lambda m, x: m.f("cumprod")(m.const(IDX) + 1, 1),
}


@pytest.mark.parametrize("name", list(INT_RESULTS))
def test_non_differentiable_results_match_torch(name, device, torch, rng):
    v = np.round(rng.standard_normal((3, 4)) * 4).astype(np.float32) / 2
    out = INT_RESULTS[name](M(trainkit, device), trainkit.tensor(v, device=device, requires_grad=True))
    ref = INT_RESULTS[name](M(torch), torch.tensor(v, requires_grad=True))
    assert tuple(out.shape) == tuple(ref.shape) and str(out.dtype).endswith(str(ref.dtype).rsplit(".")[-1])
    assert not out.requires_grad
    np.testing.assert_array_equal(to_numpy(out), ref.numpy())


def test_nonzero_as_tuple_and_return_types(device, torch):
    v = np.array([[0.0, 1.0], [2.0, 0.0]], dtype=np.float32)
    got = ix.nonzero(trainkit.tensor(v, device=device), as_tuple=True)
    want = torch.nonzero(torch.tensor(v), as_tuple=True)
    assert isinstance(got, tuple) and len(got) == 2
    for a, b in zip(got, want):
        np.testing.assert_array_equal(to_numpy(a), b.numpy())
    t = trainkit.tensor(v, device=device)
    assert set(ix.topk(t, 1)._fields) == {"values", "indices"} and type(ix.sort(t)).__name__ == "sort"


ERRORS = {
    "gather-dims": (lambda m: m.f("gather")(m.const(np.zeros((2, 2))), 0, m.const(np.array([0]))), "same number"),
    "gather-dtype": (
        lambda m: m.f("gather")(m.const(np.zeros((2, 2))), 0, m.const(IDX[:2, :2].astype(np.float32))),
        "int32/int64",
    ),
    "gather-bounds": (
        lambda m: m.f("gather")(m.const(np.zeros((2, 2))), 0, m.const(np.array([[5, 0]]))),
        "out of bounds",
    ),
    "index_select-2d": (lambda m: m.f("index_select")(m.const(np.zeros((2, 2))), 0, m.const(IDX)), "vector"),
    "masked_fill-float-mask": (lambda m: m.f("masked_fill")(m.const(np.zeros(2)), m.const(np.ones(2)), 1.0), "boolean"),
    "masked_fill-value-dims": (
        lambda m: m.f("masked_fill")(m.const(np.zeros(2)), m.const(np.ones(2, bool)), m.const(np.ones(2))),
        "0-dimensional",
    ),
    "narrow-too-long": (lambda m: m.f("narrow")(m.const(np.zeros((2, 3))), 1, 2, 2), "exceeds dimension size"),
    "select-range": (lambda m: m.f("select")(m.const(np.zeros((2, 3))), 1, 3), "out of range"),
    "repeat-few": (lambda m: m.method(m.const(np.zeros((2, 3))), "repeat", 2), "can not be smaller"),
    "roll-align": (lambda m: m.f("roll")(m.const(np.zeros((2, 3))), (1, 2), 0), "must align"),
    "tril-1d": (lambda m: m.f("tril")(m.const(np.zeros(3))), "at least 2 dimensions"),
    "diag-3d": (lambda m: m.f("diag")(m.const(np.zeros((2, 2, 2)))), "1D or 2D"),
    "topk-k": (lambda m: m.f("topk")(m.const(np.zeros(3)), 4), "k out of range"),
    "outer-2d": (lambda m: m.f("outer")(m.const(np.zeros((2, 2))), m.const(np.zeros(2))), "1-D"),
    "norm-int": (lambda m: m.f("norm")(m.const(np.arange(3))), "floating point"),
    "flip-dim": (lambda m: m.f("flip")(m.const(np.zeros(3)), (2,)), "out of range"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name, torch):
    fn, word = ERRORS[name]
    assert_same_error(torch, lambda lib, dev: fn(M(lib, dev)), word)


def test_float32_stays_float32_and_all_is_complete(device):
    x = trainkit.tensor(np.ones((2, 3), np.float32), device=device, requires_grad=True)
    for out in (ix.cumprod(x, 0), ix.prod(x), ix.norm(x), ix.einsum("ij->j", x), ix.dist(x, x * 2)):
        assert str(out.dtype).endswith("float32")
    for module in MODULES:
        public = {n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))}
        assert set(module.__all__) <= public and len(module.__all__) == len(set(module.__all__))
