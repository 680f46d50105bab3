"""The ops of ``trainkit.autograd.ops.elementwise`` and ``.trigonometric``, and ``F.softplus``: finite-difference
checks (float64) and parity with PyTorch (float32 values, gradients and node names), plus dtypes and the ops without
a gradient."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import to_numpy

import trainkit
from trainkit import functional
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.autograd.ops import elementwise, trigonometric

ew = SimpleNamespace(
    **{n: getattr(m, n) for m in (elementwise, trigonometric) for n in m.__all__}, softplus=functional.softplus
)

RTOL, ATOL = 1e-5, 1e-6


class Lib:
    """What a case calls: trainkit's functions (this module's first), or torch's (then ``torch.nn.functional``)."""

    def __init__(self, module, device="cpu"):
        self.module, self.device = module, device

    def __getattr__(self, name):
        if self.module is trainkit:
            return getattr(ew, name) if hasattr(ew, name) else getattr(trainkit, name)
        return getattr(self.module, name) if hasattr(self.module, name) else getattr(self.module.nn.functional, name)


@dataclass(frozen=True)
class Case:
    id: str
    fn: Callable
    args: tuple  # (shape, kind) per input; kind: normal, unit (|x| < 0.9), positive, away (|x| in [0.5, 1.5])
    gradgrad: bool = False


def _draw(shape, kind, rng) -> np.ndarray:
    if kind == "normal":
        v = rng.standard_normal(shape)
    elif kind == "unit":
        v = rng.uniform(-0.9, 0.9, shape)
    elif kind == "positive":
        v = rng.uniform(0.5, 2.0, shape)
    elif kind == "away":
        v = rng.uniform(0.5, 1.5, shape) * np.where(rng.random(shape) < 0.5, -1, 1)
    elif kind == "wide":
        v = rng.uniform(-4.0, 4.0, shape)
    else:
        raise ValueError(kind)
    return np.asarray(v, dtype=np.float64)


N = ((3, 4), "normal")
CASES = [
    Case("sin", lambda m, a: m.sin(a), (N,), gradgrad=True),
    Case("cos", lambda m, a: m.cos(a), (N,), gradgrad=True),
    Case("tan", lambda m, a: m.tan(a), (((3, 4), "unit"),), gradgrad=True),
    Case("asin", lambda m, a: m.asin(a), (((3, 4), "unit"),), gradgrad=True),
    Case("acos", lambda m, a: m.acos(a), (((3, 4), "unit"),)),
    Case("atan", lambda m, a: m.atan(a), (N,), gradgrad=True),
    Case("sinh", lambda m, a: m.sinh(a), (N,), gradgrad=True),
    Case("cosh", lambda m, a: m.cosh(a), (N,)),
    Case("exp2", lambda m, a: m.exp2(a), (N,), gradgrad=True),
    Case("expm1", lambda m, a: m.expm1(a), (N,)),
    Case("log2", lambda m, a: m.log2(a), (((3, 4), "positive"),)),
    Case("log10", lambda m, a: m.log10(a), (((3, 4), "positive"),)),
    Case("log1p", lambda m, a: m.log1p(a), (((3, 4), "positive"),), gradgrad=True),
    Case("rsqrt", lambda m, a: m.rsqrt(a), (((3, 4), "positive"),), gradgrad=True),
    Case("square", lambda m, a: m.square(a), (N,), gradgrad=True),
    Case("erf", lambda m, a: m.erf(a), (N,), gradgrad=True),
    Case("softplus", lambda m, a: m.softplus(a), (((3, 4), "wide"),), gradgrad=True),
    Case("softplus-beta-threshold", lambda m, a: m.softplus(a, beta=2, threshold=3), (((3, 4), "wide"),)),
    Case("floor", lambda m, a: m.floor(a * 3), (N,)),
    Case("ceil", lambda m, a: m.ceil(a * 3), (N,)),
    Case("round", lambda m, a: m.round(a * 3), (N,)),
    Case("round-decimals", lambda m, a: m.round(a, decimals=1), (N,)),
    Case("trunc", lambda m, a: m.trunc(a * 3), (N,)),
    Case("frac", lambda m, a: m.frac(a * 3), (N,)),
    Case("atan2", lambda m, a, b: m.atan2(a, b), (N, ((3, 4), "away")), gradgrad=True),
    Case("atan2-broadcast", lambda m, a, b: m.atan2(a, b), (((3, 1), "normal"), ((4,), "away"))),
    Case("fmod-number", lambda m, a: m.fmod(a * 3, 0.7), (N,)),
    Case("fmod-tensor", lambda m, a, b: m.fmod(a * 3, b), (N, ((4,), "away"))),
    Case("lerp-number", lambda m, a, b: m.lerp(a, b, 0.3), (N, ((4,), "normal")), gradgrad=True),
    Case("lerp-tensor", lambda m, a, b, w: m.lerp(a, b, w), (N, N, ((3, 1), "unit")), gradgrad=True),
    Case(
        "addcmul",
        lambda m, a, b, c: m.addcmul(a, b, c, value=0.5),
        (N, ((4,), "normal"), ((3, 1), "normal")),
        gradgrad=True,
    ),
    Case("addcdiv", lambda m, a, b, c: m.addcdiv(a, b, c, value=-2), (N, N, ((4,), "away")), gradgrad=True),
    Case("addcmul-default-value", lambda m, a, b, c: m.addcmul(a, b, c), (N, N, N)),
]
GRADGRAD = [c for c in CASES if c.gradgrad]


def _inputs(case, device, rng, dtype):
    arrays = [_draw(shape, kind, rng).astype(dtype) for shape, kind in case.args]
    return arrays, [trainkit.tensor(x, device=device, requires_grad=True) for x in arrays]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_gradcheck(case, device, rng):
    _, inputs = _inputs(case, device, rng, np.float64)
    assert gradcheck(lambda *xs: case.fn(Lib(trainkit, device), *xs), inputs)


@pytest.mark.parametrize("case", GRADGRAD, ids=[c.id for c in GRADGRAD])
def test_gradgradcheck(case, device, rng):
    _, inputs = _inputs(case, device, rng, np.float64)
    assert gradgradcheck(lambda *xs: case.fn(Lib(trainkit, device), *xs), inputs)


def _same(tk, th, what: str) -> None:
    assert tuple(tk.shape) == tuple(th.shape), what
    assert str(tk.dtype).rsplit(".", 1)[-1] == str(th.dtype).rsplit(".", 1)[-1], f"{what}: {tk.dtype} {th.dtype}"
    np.testing.assert_allclose(to_numpy(tk), th.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_values_grads_and_names_match_torch(case, device, torch, rng):
    arrays, tk = _inputs(case, device, rng, np.float32)
    th = [torch.tensor(x, requires_grad=True) for x in arrays]
    out, ref = case.fn(Lib(trainkit, device), *tk), case.fn(Lib(torch), *th)
    _same(out, ref, "output")
    assert out.device.type == trainkit.device(device).type
    assert type(out.grad_fn).__name__ == type(ref.grad_fn).__name__
    upstream = rng.standard_normal(tuple(ref.shape)).astype(np.float32)
    out.backward(trainkit.tensor(upstream, device=device))
    ref.backward(torch.tensor(upstream))
    for i, (x, xr) in enumerate(zip(tk, th)):
        assert x.grad is not None and x.grad.device == x.device, f"input {i}"
        _same(x.grad, xr.grad, f"grad of input {i}")


NO_GRAD = {
    "isinf": lambda m: m.isinf(m.tensor([1.0, float("inf"), -float("inf"), float("nan")])),
    "isclose": lambda m: m.isclose(m.tensor([1.0, 2.0, float("nan")]), m.tensor([1.0 + 1e-7, 2.1, float("nan")])),
    "isclose-tolerances": lambda m: m.isclose(m.tensor([1.0, 2.0]), m.tensor([1.05, 2.3]), rtol=0.1, atol=0.0),
    "isclose-equal-nan": lambda m: m.isclose(m.tensor([float("nan")]), m.tensor([float("nan")]), equal_nan=True),
    "sin-int64": lambda m: m.sin(m.tensor([0, 1, 2])),
    "erf-int64": lambda m: m.erf(m.tensor([0, 1, -2])),
    "atan2-int64": lambda m: m.atan2(m.tensor([1, -2]), m.tensor([3, 4])),
    "atan2-float32-float64": lambda m: m.atan2(m.tensor([1.0, -2.0]), m.tensor([3.0, 4.0], dtype=m.float64)),
    "square-int64": lambda m: m.square(m.tensor([-3, 2])),
    "floor-int64": lambda m: m.floor(m.tensor([-3, 2])),
    "round-half-even": lambda m: m.round(m.tensor([0.5, 1.5, 2.5, -0.5, -1.5])),
    "round-decimals-negative": lambda m: m.round(m.tensor([1234.0, 1250.0, -49.0]), decimals=-2),
    "fmod-int64": lambda m: m.fmod(m.tensor([-7, 7, 5]), 3),
    "fmod-sign-of-dividend": lambda m: m.fmod(m.tensor([-3.0, 3.0]), m.tensor([2.0, -2.0])),
    "frac-negative": lambda m: m.frac(m.tensor([-1.25, 2.75])),
    "softplus-large": lambda m: m.softplus(m.tensor([-100.0, 0.0, 30.0, 100.0])),
    "addcmul-float32-float64": lambda m: m.addcmul(m.tensor([1.0]), m.tensor([2.0]), m.tensor([3.0], dtype=m.float64)),
    "log1p-tiny": lambda m: m.log1p(m.tensor([1e-10, -1e-10])),
    "expm1-tiny": lambda m: m.expm1(m.tensor([1e-10, -1e-10])),
}


@pytest.mark.parametrize("make", NO_GRAD.values(), ids=NO_GRAD.keys())
def test_values_and_dtypes_match_torch(make, device, torch):
    class Bound(Lib):
        def tensor(self, data, dtype=None):
            return self.module.tensor(data, dtype=dtype, device=self.device)

    out, ref = make(Bound(trainkit, device)), make(Bound(torch))
    assert str(out.dtype).rsplit(".", 1)[-1] == str(ref.dtype).rsplit(".", 1)[-1]
    np.testing.assert_allclose(to_numpy(out), ref.numpy(), rtol=RTOL, atol=1e-12)
    assert not out.requires_grad


def test_rounding_ops_give_zero_gradients_and_tests_give_none(device):
    x = trainkit.tensor([0.3, -1.7, 2.5], device=device, requires_grad=True)
    for fn in (ew.floor, ew.ceil, ew.round, ew.trunc):
        out = fn(x)
        assert out.requires_grad and out.dtype == trainkit.float32
        (g,) = trainkit.autograd.grad(out.sum(), x)
        assert np.array_equal(to_numpy(g), np.zeros(3, dtype=np.float32))
    assert not ew.isinf(x).requires_grad and not ew.isclose(x, x).requires_grad


def test_float32_stays_float32(device):
    x = trainkit.tensor([0.25, 0.5], device=device, requires_grad=True)
    w = trainkit.tensor([0.1, 0.9], device=device, requires_grad=True)
    outs = [
        getattr(ew, n)(x)
        for n in (
            "sin",
            "cos",
            "tan",
            "asin",
            "acos",
            "atan",
            "sinh",
            "cosh",
            "exp2",
            "expm1",
            "log2",
            "log10",
            "log1p",
            "rsqrt",
            "square",
            "erf",
            "softplus",
            "frac",
            "floor",
        )
    ]
    outs += [
        ew.atan2(x, w),
        ew.fmod(x, w),
        ew.fmod(x, 0.2),
        ew.lerp(x, w, 0.5),
        ew.lerp(x, w, w),
        ew.addcmul(x, w, w),
        ew.addcdiv(x, w, w),
    ]
    for out in outs:
        assert out.dtype == trainkit.float32, type(out.grad_fn).__name__
        (gx,) = trainkit.autograd.grad(out.sum(), x)
        assert gx.dtype == trainkit.float32


def test_frac_of_integers_is_an_error(torch):
    with pytest.raises(NotImplementedError):
        torch.frac(torch.tensor([1, 2]))
    with pytest.raises(NotImplementedError):
        ew.frac(trainkit.tensor([1, 2]))


def test_binary_ops_name_both_shapes_when_they_do_not_broadcast(device):
    a, b = trainkit.ones(2, 3, device=device), trainkit.ones(4, 3, device=device)
    for fn in (ew.atan2, ew.fmod, lambda x, y: ew.lerp(x, y, 0.5), lambda x, y: ew.addcmul(x, y, y)):
        with pytest.raises(RuntimeError, match="size of tensor"):
            fn(a, b)


def test_all_names_are_public_functions():
    for module in (elementwise, trigonometric):
        assert sorted(module.__all__) == sorted(set(module.__all__))
        assert all(callable(getattr(module, n)) for n in module.__all__)
