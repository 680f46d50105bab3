"""Finite-difference checks (float64) of every differentiable op, and of second derivatives for a subset.

The case table ``CASES`` is shared with ``test_ops_torch_parity.py``: each case is a function of a tensor library
(trainkit or torch, see ``Lib``) and its inputs, so that the same expression runs on both.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck


# ------------------------------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class Arg:
    """One input of a case: its shape, how its values are drawn, and whether it requires grad.

    Kinds keep inputs away from points where an op is not differentiable: ``away`` has |x| in [0.1, 0.4] or
    [0.6, 1.5] (never 0, never the clamp bounds +-0.5), ``distinct`` has no two values within 0.2 of each other
    (no ties for max/min), ``low`` and ``high`` lie in k + [0.1, 0.2] and k + [0.6, 0.7] for integers k, so that a
    ``low`` and a ``high`` value are never within 0.3 of each other (no ties for maximum/minimum).
    """

    shape: tuple
    kind: str = "normal"
    grad: bool = True


def normal(*shape, grad=True) -> Arg:
    return Arg(shape, "normal", grad)


def positive(*shape, grad=True) -> Arg:
    return Arg(shape, "positive", grad)


def away(*shape, grad=True) -> Arg:
    return Arg(shape, "away", grad)


def distinct(*shape, grad=True) -> Arg:
    return Arg(shape, "distinct", grad)


def low(*shape, grad=True) -> Arg:
    return Arg(shape, "low", grad)


def high(*shape, grad=True) -> Arg:
    return Arg(shape, "high", grad)


def draw(arg: Arg, rng: np.random.Generator) -> np.ndarray:
    """Values for ``arg`` as a float64 array."""
    shape = arg.shape
    if arg.kind == "normal":
        values = rng.standard_normal(shape)
    elif arg.kind == "positive":
        values = rng.uniform(0.5, 2.0, shape)
    elif arg.kind == "away":
        magnitude = np.where(rng.random(shape) < 0.5, rng.uniform(0.1, 0.4, shape), rng.uniform(0.6, 1.5, shape))
        values = np.where(rng.random(shape) < 0.5, -magnitude, magnitude)
    elif arg.kind == "distinct":
        n = int(np.prod(shape))
        values = ((rng.permutation(n) - n / 2) * 0.25 + rng.uniform(0.0, 0.05, n)).reshape(shape)
    elif arg.kind == "low":
        values = rng.integers(-2, 3, shape) + rng.uniform(0.1, 0.2, shape)
    elif arg.kind == "high":
        values = rng.integers(-2, 3, shape) + rng.uniform(0.6, 0.7, shape)
    else:
        raise ValueError(arg.kind)
    return np.asarray(values, dtype=np.float64)


def pattern(shape: tuple, every: int = 3) -> np.ndarray:
    """A fixed boolean array of ``shape`` with some True and some False values."""
    return np.arange(int(np.prod(shape))).reshape(shape) % every == 0


class Lib:
    """A tensor library (trainkit or torch) bound to a device: what the case functions call.

    ``m.const`` and ``m.tensor`` make tensors on the device; any other attribute is the library's own (``m.cat``,
    ``m.where``, ``m.float64``).
    """

    def __init__(self, module, device="cpu"):
        self.module = module
        self.device = device

    def const(self, values):
        """A tensor of ``values`` with NumPy's dtype for them (int64 indices, bool masks)."""
        return self.module.tensor(np.asarray(values), device=self.device)

    def tensor(self, data, dtype=None, requires_grad=False):
        """The library's own ``tensor(data)`` (its dtype inference), on the device."""
        return self.module.tensor(data, dtype=dtype, device=self.device, requires_grad=requires_grad)

    def __getattr__(self, name):
        return getattr(self.module, name)


@dataclass(frozen=True)
class Case:
    id: str
    fn: Callable
    args: tuple
    gradgrad: bool = False
    eps: float = 1e-6


CASES: list[Case] = []


def case(id: str, fn: Callable, *args: Arg, gradgrad: bool = False, eps: float = 1e-6) -> None:
    CASES.append(Case(id, fn, args, gradgrad, eps))


# --------------------------------------------------------------------------------------- element-wise binary
BROADCAST_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 1), (4,)),
    ((4,), (3, 1)),
    ((2, 1, 4), (3, 1)),
    ((), (3,)),
    ((3, 4), ()),
]


def _op(fn: Callable) -> Callable:
    """A case function from a plain function of the inputs (an operator)."""
    return lambda m, *xs: fn(*xs)


def _shape_id(shape: tuple) -> str:
    return "x".join(map(str, shape)) or "scalar"


for _sa, _sb in BROADCAST_SHAPES:
    _sid = f"{_shape_id(_sa)}-{_shape_id(_sb)}"
    _out = np.broadcast_shapes(_sa, _sb)
    _first = _sa == (3, 4) and _sb == (3, 4)
    case(f"add-{_sid}", _op(operator.add), normal(*_sa), normal(*_sb), gradgrad=_first or _sa == (3, 1))
    case(f"sub-{_sid}", _op(operator.sub), normal(*_sa), normal(*_sb))
    case(f"mul-{_sid}", _op(operator.mul), normal(*_sa), normal(*_sb), gradgrad=True)
    case(f"div-{_sid}", _op(operator.truediv), normal(*_sa), away(*_sb), gradgrad=True)
    case(f"pow-tensor-tensor-{_sid}", _op(operator.pow), positive(*_sa), normal(*_sb), gradgrad=True)
    case(f"maximum-{_sid}", lambda m, a, b: m.maximum(a, b), low(*_sa), high(*_sb), gradgrad=_first)
    case(f"minimum-{_sid}", lambda m, a, b: m.minimum(a, b), high(*_sa), low(*_sb), gradgrad=_first)
    case(
        f"where-{_sid}",
        lambda m, a, b, _s=_out: m.where(m.const(pattern(_s)), a, b),
        normal(*_sa),
        normal(*_sb),
        gradgrad=_first,
    )

case("add-fn-alpha", lambda m, a, b: m.add(a, b, alpha=2.5), normal(3, 4), normal(4))
case("sub-fn-alpha", lambda m, a, b: m.sub(a, b, alpha=0.5), normal(3, 4), normal(3, 1))
case("mul-fn", lambda m, a, b: m.mul(a, b), normal(3, 4), normal(3, 4))
case("div-fn", lambda m, a, b: m.div(a, b), normal(3, 4), away(4))
case("add-one-requires-grad", _op(operator.add), normal(3, 4), normal(4, grad=False))
case("mul-one-requires-grad", _op(operator.mul), normal(3, 4, grad=False), normal(3, 1))
case("div-numerator-only", _op(operator.truediv), normal(3, 4), away(3, 4, grad=False))
case("div-denominator-only", _op(operator.truediv), normal(3, 4, grad=False), away(3, 4))
case("pow-tensor-tensor-exponent-only", _op(operator.pow), positive(3, 4, grad=False), normal(3, 4))
case("pow-tensor-tensor-base-only", _op(operator.pow), positive(3, 4), normal(3, 4, grad=False))
case("where-scalar-other", lambda m, a: m.where(m.const(pattern((3, 4))), a, 0.0), normal(3, 4))
case(
    "where-one-requires-grad",
    lambda m, a, b: m.where(m.const(pattern((3, 4))), a, b),
    normal(3, 4),
    normal(3, 4, grad=False),
)
case("maximum-input-with-itself", lambda m, a: m.maximum(a, a * 0.5 + 0.25), away(3, 4))

# ---------------------------------------------------------------------------------- with a Python number
case("add-number", lambda m, a: a + 2.5, normal(3, 4))
case("radd-number", lambda m, a: 2.5 + a, normal(3, 4))
case("sub-number", lambda m, a: a - 2.5, normal(3, 4))
case("rsub-number", lambda m, a: 2.5 - a, normal(3, 4))
case("mul-float", lambda m, a: a * -1.5, normal(3, 4))
case("rmul-float", lambda m, a: -1.5 * a, normal(3, 4))
case("mul-int", lambda m, a: a * 2, normal(3, 4))
case("div-number", lambda m, a: a / 4.0, normal(3, 4))
case("rdiv-number", lambda m, a: 3.0 / a, away(3, 4), gradgrad=True)
case("neg", _op(operator.neg), normal(3, 4))
case("neg-fn", lambda m, a: m.neg(a), normal(3, 4))
case("pow-int-2", lambda m, a: a**2, normal(3, 4), gradgrad=True)
case("pow-int-3", lambda m, a: a**3, normal(3, 4), gradgrad=True)
case("pow-float", lambda m, a: a**2.5, positive(3, 4), gradgrad=True)
case("pow-negative", lambda m, a: a**-1.5, positive(3, 4))
case("pow-half", lambda m, a: a**0.5, positive(3, 4))
case("pow-zero", lambda m, a: a**0, normal(3, 4))
case("pow-method", lambda m, a: a.pow(3), normal(3, 4))
case("rpow-float", lambda m, a: 2.0**a, normal(3, 4), gradgrad=True)
case("rpow-below-one", lambda m, a: 0.5**a, normal(3, 4))
case("rpow-int", lambda m, a: 2**a, normal(3, 4))
case("rpow-0dim", lambda m, a: 3.0**a, normal())

# ------------------------------------------------------------------------------------- element-wise unary
case("exp", lambda m, a: a.exp(), normal(3, 4), gradgrad=True)
case("exp-fn", lambda m, a: m.exp(a), normal(2, 3))
case("log", lambda m, a: a.log(), positive(3, 4), gradgrad=True)
case("log-fn", lambda m, a: m.log(a), positive(2, 3))
case("sqrt", lambda m, a: a.sqrt(), positive(3, 4), gradgrad=True)
case("sqrt-fn", lambda m, a: m.sqrt(a), positive(2, 3))
case("abs", lambda m, a: a.abs(), away(3, 4), gradgrad=True)
case("abs-fn", lambda m, a: m.abs(a), away(2, 3))
case("abs-operator", lambda m, a: abs(a), away(2, 3))
case("clamp-both", lambda m, a: m.clamp(a, -0.5, 0.5), away(3, 4), gradgrad=True)
case("clamp-min-only", lambda m, a: a.clamp(min=-0.5), away(3, 4))
case("clamp-max-only", lambda m, a: a.clamp(max=0.5), away(3, 4))
case("clamp-positional", lambda m, a: a.clamp(-0.5, 0.5), away(3, 4))
case("clip", lambda m, a: a.clip(-0.5, 0.5), away(3, 4))
case("clamp_min-fn", lambda m, a: m.clamp_min(a, 0.5), away(3, 4))
case("clamp_max-fn", lambda m, a: m.clamp_max(a, -0.5), away(3, 4))
case("clamp-tensor-bounds", lambda m, a, lo: a.clamp(min=lo, max=lo + 1.0), high(3, 4), low(3, 4), gradgrad=True)
case("clamp-tensor-bounds-constant", lambda m, a, lo: a.clamp(min=lo, max=lo + 1.0), high(3, 4), low(4, grad=False))
case("relu", lambda m, a: a.relu(), away(3, 4), gradgrad=True)
case("relu-fn", lambda m, a: m.relu(a), away(2, 3))
case("sigmoid", lambda m, a: a.sigmoid(), normal(3, 4), gradgrad=True)
case("sigmoid-large", lambda m, a: m.sigmoid(a * 8.0), normal(3, 4))
case("tanh", lambda m, a: a.tanh(), normal(3, 4), gradgrad=True)
case("tanh-fn", lambda m, a: m.tanh(a), normal(2, 3))
case("clone", lambda m, a: a.clone(), normal(3, 4), gradgrad=True)
case("clone-fn", lambda m, a: m.clone(a), normal(3, 4))
case("to-dtype-round-trip", lambda m, a: a.to(m.float32).to(m.float64), normal(3, 4), eps=1e-3)
case("to-dtype-keyword", lambda m, a: (a * 2).to(dtype=m.float32).to(dtype=m.float64), normal(3, 4), eps=1e-3)
case("float-double", lambda m, a: a.float().double(), normal(3, 4), eps=1e-3)

# -------------------------------------------------------------------------------- softmax and friends
for _dim in (0, 1, -1):
    case(f"softmax-dim{_dim}", lambda m, a, _d=_dim: m.softmax(a, dim=_d), normal(3, 4), gradgrad=_dim == 1)
    case(f"log_softmax-dim{_dim}", lambda m, a, _d=_dim: a.log_softmax(_d), normal(3, 4), gradgrad=_dim == 1)
case("softmax-3d", lambda m, a: a.softmax(1), normal(2, 3, 4))
case("log_softmax-3d", lambda m, a: m.log_softmax(a, dim=2), normal(2, 3, 4))
case("logsumexp-dim1", lambda m, a: m.logsumexp(a, dim=1), normal(3, 4), gradgrad=True)
case("logsumexp-dim-keepdim", lambda m, a: a.logsumexp(0, keepdim=True), normal(3, 4))
case("logsumexp-dims", lambda m, a: m.logsumexp(a, dim=(0, 2)), normal(2, 3, 4), gradgrad=True)
case("logsumexp-dims-keepdim", lambda m, a: a.logsumexp((0, 2), keepdim=True), normal(2, 3, 4))
case("logsumexp-large", lambda m, a: m.logsumexp(a * 50.0, dim=-1), normal(3, 4))

# -------------------------------------------------------------------------------------------- reductions
_REDUCTION_DIMS = [
    ("all", {}),
    ("dim0", {"dim": 0}),
    ("dim-1", {"dim": -1}),
    ("dim1-keepdim", {"dim": 1, "keepdim": True}),
    ("dims02", {"dim": (0, 2)}),
    ("dims02-keepdim", {"dim": (0, 2), "keepdim": True}),
    ("dims-all", {"dim": (0, 1, 2)}),
    ("all-keepdim", {"dim": None, "keepdim": True}),
]
for _name, _kw in _REDUCTION_DIMS:
    _gg = _name in ("all", "dims02-keepdim")
    case(f"sum-{_name}", lambda m, a, _k=_kw: a.sum(**_k), normal(2, 3, 4), gradgrad=_gg)
    case(f"mean-{_name}", lambda m, a, _k=_kw: a.mean(**_k), normal(2, 3, 4), gradgrad=_gg)
    case(f"var-{_name}", lambda m, a, _k=_kw: a.var(**_k), normal(2, 3, 4), gradgrad=_gg)
    case(f"std-{_name}", lambda m, a, _k=_kw: a.std(**_k), normal(2, 3, 4), gradgrad=_gg)
    case(f"var-correction0-{_name}", lambda m, a, _k=_kw: a.var(**_k, correction=0), normal(2, 3, 4))
    case(f"std-correction0-{_name}", lambda m, a, _k=_kw: a.std(**_k, correction=0), normal(2, 3, 4))
case("sum-fn", lambda m, a: m.sum(a, 1), normal(3, 4))
case("mean-fn", lambda m, a: m.mean(a, dim=(0, 1), keepdim=True), normal(3, 4))
case("var-fn", lambda m, a: m.var(a, 0), normal(3, 4))
case("std-fn", lambda m, a: m.std(a, dim=1, keepdim=True), normal(3, 4))
case("var-correction2", lambda m, a: a.var(1, correction=2), normal(3, 5))
case("var-unbiased-false", lambda m, a: a.var(1, unbiased=False), normal(3, 5))
case("std-unbiased-false", lambda m, a: a.std(0, unbiased=False, keepdim=True), normal(3, 5))
case("sum-1d", lambda m, a: a.sum(0), normal(5))
case("mean-0dim", lambda m, a: a.mean(), normal())

for _red in ("max", "min"):
    case(f"{_red}-all", lambda m, a, _r=_red: getattr(a, _r)(), distinct(3, 4), gradgrad=_red == "max")
    case(f"{_red}-fn-all", lambda m, a, _r=_red: getattr(m, _r)(a), distinct(2, 3, 4))
    case(f"{_red}-dim1", lambda m, a, _r=_red: getattr(a, _r)(1), distinct(3, 4), gradgrad=_red == "max")
    case(f"{_red}-dim0-keepdim", lambda m, a, _r=_red: getattr(a, _r)(0, keepdim=True), distinct(3, 4))
    case(f"{_red}-dim-1-3d", lambda m, a, _r=_red: getattr(a, _r)(dim=-1), distinct(2, 3, 4))
    case(f"{_red}-values", lambda m, a, _r=_red: getattr(m, _r)(a, 1).values, distinct(3, 4))
    case(f"{_red}-binary", lambda m, a, b, _r=_red: getattr(m, _r)(a, b), low(3, 4), high(4))
for _red in ("amax", "amin"):
    case(f"{_red}-all", lambda m, a, _r=_red: getattr(a, _r)(), distinct(2, 3, 4), gradgrad=_red == "amax")
    case(f"{_red}-dim1", lambda m, a, _r=_red: getattr(a, _r)(1), distinct(2, 3, 4))
    case(f"{_red}-dim-1-keepdim", lambda m, a, _r=_red: getattr(a, _r)(-1, keepdim=True), distinct(2, 3, 4))
    case(f"{_red}-dims02", lambda m, a, _r=_red: getattr(m, _r)(a, dim=(0, 2)), distinct(2, 3, 4))
    case(f"{_red}-dims02-keepdim", lambda m, a, _r=_red: getattr(m, _r)(a, (0, 2), keepdim=True), distinct(2, 3, 4))

# ------------------------------------------------------------------------------------------------ matmul
case("matmul-2d-2d", _op(operator.matmul), normal(3, 4), normal(4, 5), gradgrad=True)
case("matmul-2d-1d", _op(operator.matmul), normal(3, 4), normal(4), gradgrad=True)
case("matmul-1d-2d", _op(operator.matmul), normal(4), normal(4, 5), gradgrad=True)
case("matmul-1d-1d", _op(operator.matmul), normal(4), normal(4), gradgrad=True)
case("matmul-3d-3d", _op(operator.matmul), normal(2, 3, 4), normal(2, 4, 5), gradgrad=True)
case("matmul-3d-2d", _op(operator.matmul), normal(2, 3, 4), normal(4, 5), gradgrad=True)
case("matmul-2d-3d", _op(operator.matmul), normal(3, 4), normal(2, 4, 5))
case("matmul-3d-1d", _op(operator.matmul), normal(2, 3, 4), normal(4))
case("matmul-1d-3d", _op(operator.matmul), normal(4), normal(2, 4, 5))
case("matmul-4d-3d-broadcast", _op(operator.matmul), normal(2, 1, 3, 4), normal(3, 4, 2))
case("matmul-fn", lambda m, a, b: m.matmul(a, b), normal(3, 4), normal(4, 2))
case("matmul-one-requires-grad", _op(operator.matmul), normal(3, 4, grad=False), normal(4, 2))
case("mm", lambda m, a, b: m.mm(a, b), normal(3, 4), normal(4, 5), gradgrad=True)
case("mm-method", lambda m, a, b: a.mm(b), normal(2, 3), normal(3, 2))
case("bmm", lambda m, a, b: m.bmm(a, b), normal(2, 3, 4), normal(2, 4, 5), gradgrad=True)
case("bmm-method", lambda m, a, b: a.bmm(b), normal(3, 2, 2), normal(3, 2, 4))

# ------------------------------------------------------------------------------------------ shape changes
case("reshape", lambda m, a: a.reshape(4, 3), normal(3, 4), gradgrad=True)
case("reshape-minus-one", lambda m, a: a.reshape(-1), normal(2, 3, 4))
case("reshape-tuple", lambda m, a: a.reshape((6, 4)), normal(2, 3, 4))
case("reshape-fn", lambda m, a: m.reshape(a, (2, 6)), normal(3, 4))
case("reshape-of-transpose", lambda m, a: a.t().reshape(12), normal(3, 4))
case("view", lambda m, a: a.view(2, 6), normal(3, 4))
case("view-minus-one", lambda m, a: a.view(-1, 4), normal(2, 3, 4))
case("flatten", lambda m, a: a.flatten(), normal(2, 3, 4))
case("flatten-start", lambda m, a: a.flatten(1), normal(2, 3, 4))
case("flatten-range", lambda m, a: m.flatten(a, 0, 1), normal(2, 3, 4))
case("squeeze", lambda m, a: a.squeeze(), normal(3, 1, 4, 1))
case("squeeze-dim", lambda m, a: a.squeeze(1), normal(3, 1, 4, 1))
case("squeeze-negative-dim", lambda m, a: m.squeeze(a, -1), normal(3, 1, 4, 1))
case("unsqueeze-0", lambda m, a: a.unsqueeze(0), normal(3, 4))
case("unsqueeze-negative", lambda m, a: m.unsqueeze(a, -1), normal(3, 4))
case("transpose", lambda m, a: a.transpose(0, 2), normal(2, 3, 4), gradgrad=True)
case("transpose-fn-negative", lambda m, a: m.transpose(a, -1, 0), normal(2, 3, 4))
case("t", lambda m, a: a.t(), normal(3, 4))
case("t-fn", lambda m, a: m.t(a), normal(3, 4))
case("T-2d", lambda m, a: a.T, normal(3, 4))
case("mT", lambda m, a: a.mT, normal(2, 3, 4))
case("permute", lambda m, a: a.permute(2, 0, 1), normal(2, 3, 4), gradgrad=True)
case("permute-tuple", lambda m, a: a.permute((1, 2, 0)), normal(2, 3, 4))
case("permute-fn", lambda m, a: m.permute(a, (2, 1, 0)), normal(2, 3, 4))
case("expand", lambda m, a: a.expand(3, 4), normal(4), gradgrad=True)
case("expand-new-dims", lambda m, a: a.expand(2, 3, 4), normal(3, 1))
case("expand-minus-one", lambda m, a: a.expand(-1, 4), normal(3, 1))
case("expand_as", lambda m, a, b: a.expand_as(b) * b, normal(3, 1), normal(3, 4))

# -------------------------------------------------------------------------------------------- cat / stack
case("cat-dim0", lambda m, a, b: m.cat([a, b]), normal(2, 3), normal(4, 3), gradgrad=True)
case("cat-dim1-three", lambda m, a, b, c: m.cat([a, b, c], dim=1), normal(2, 3), normal(2, 1), normal(2, 2))
case("cat-dim-1", lambda m, a, b: m.cat((a, b), -1), normal(2, 3, 1), normal(2, 3, 2))
case("cat-dim1-3d", lambda m, a, b: m.cat([a, b], 1), normal(2, 1, 4), normal(2, 3, 4))
case("cat-one-requires-grad", lambda m, a, b: m.cat([a, b]), normal(2, 3), normal(1, 3, grad=False))
case("cat-same-tensor", lambda m, a: m.cat([a, a * 2, a]), normal(2, 3))
case("concat", lambda m, a, b: m.concat([a, b], dim=0), normal(2, 3), normal(1, 3))
for _dim in (0, 1, 2, -1):
    case(
        f"stack-dim{_dim}",
        lambda m, a, b, _d=_dim: m.stack([a, b], dim=_d),
        normal(2, 3),
        normal(2, 3),
        gradgrad=_dim == 1,
    )
case("stack-three", lambda m, a, b, c: m.stack((a, b, c)), normal(4), normal(4), normal(4))
case("stack-0dim", lambda m, a, b: m.stack([a, b]), normal(), normal())

# ------------------------------------------------------------------------------------------------ getitem
_MASK_2D = np.array(
    [
        [True, False, True, False, False],
        [False, False, False, True, True],
        [True, True, False, False, False],
        [False, False, False, False, True],
    ]
)
case("getitem-int", lambda m, a: a[1], normal(4, 5), gradgrad=True)
case("getitem-negative-int", lambda m, a: a[-1], normal(4, 5))
case("getitem-int-int", lambda m, a: a[2, -3], normal(4, 5))
case("getitem-column-negative", lambda m, a: a[:, -2], normal(4, 5))
case("getitem-slice", lambda m, a: a[1:3], normal(4, 5))
case("getitem-slice-step", lambda m, a: a[::2], normal(4, 5), gradgrad=True)
case("getitem-slices-step", lambda m, a: a[1:, 0:5:2], normal(4, 5))
case("getitem-negative-slice", lambda m, a: a[-3:-1, -2:], normal(4, 5))
case("getitem-none", lambda m, a: a[None], normal(4, 5))
case("getitem-none-middle", lambda m, a: a[:, None], normal(4, 5))
case("getitem-ellipsis", lambda m, a: a[..., 1], normal(2, 3, 4))
case("getitem-none-ellipsis-slice", lambda m, a: a[None, ..., 0:2], normal(2, 3, 4))
case("getitem-int-ellipsis", lambda m, a: a[1, ...], normal(2, 3, 4))
case("getitem-list-repeated", lambda m, a: a[[0, 0, 2]], normal(4, 5), gradgrad=True)
case("getitem-tensor-repeated", lambda m, a: a[m.const([3, 0, 3, 3])], normal(4, 5), gradgrad=True)
case("getitem-tensor-negative", lambda m, a: a[m.const([-1, 0, -1])], normal(4, 5))
case("getitem-columns-repeated", lambda m, a: a[:, [1, 1, 4]], normal(4, 5))
case("getitem-two-index-tensors", lambda m, a: a[m.const([0, 2, 2]), m.const([1, 1, 4])], normal(4, 5))
case("getitem-int-and-list", lambda m, a: a[1, [0, 0, 3]], normal(4, 5))
case("getitem-tensor-2d-index", lambda m, a: a[m.const([[0, 1], [1, 3]])], normal(4, 5))
case("getitem-tensor-0dim", lambda m, a: a[m.const(2)], normal(4, 5))
case("getitem-mask-2d", lambda m, a: a[m.const(_MASK_2D)], normal(4, 5), gradgrad=True)
case("getitem-mask-rows", lambda m, a: a[m.const([True, False, True, True])], normal(4, 5))
case("getitem-mask-from-comparison", lambda m, a: a[a > 0.0], away(4, 5))
case("getitem-mask-and-slice", lambda m, a: a[m.const([True, False, True, True]), 1:], normal(4, 5))


# ------------------------------------------------------------------------------- setitem on a non-leaf
def _setitem(index):
    def fn(m, a, b):
        x = a * 1
        x[index(m) if callable(index) else index] = b
        return x

    return fn


case("setitem-int", _setitem(1), normal(4, 5), normal(5), gradgrad=True)
case("setitem-negative-int", _setitem(-1), normal(4, 5), normal(5))
case("setitem-slice", _setitem(slice(1, 3)), normal(4, 5), normal(2, 5))
case("setitem-slice-step-column", _setitem((slice(None, None, 2), 1)), normal(4, 5), normal(2))
case("setitem-column-negative", _setitem((slice(None), -1)), normal(4, 5), normal(4))
case("setitem-element-0dim", _setitem((1, 2)), normal(4, 5), normal())
case("setitem-broadcast-row", _setitem(slice(1, 3)), normal(4, 5), normal(5), gradgrad=True)
case("setitem-broadcast-one", _setitem(slice(1, 3)), normal(4, 5), normal(1))
case("setitem-mask", _setitem(lambda m: m.const(_MASK_2D)), normal(4, 5), normal(int(_MASK_2D.sum())))
case("setitem-index-tensor", _setitem(lambda m: m.const([0, 2])), normal(4, 5), normal(2, 5), gradgrad=True)
case("setitem-ellipsis", _setitem((Ellipsis, 0)), normal(2, 3, 4), normal(2, 3))
case("setitem-value-only", _setitem(1), normal(4, 5, grad=False), normal(5))
case("setitem-target-only", _setitem(1), normal(4, 5), normal(5, grad=False))


def _setitem_number(m, a):
    x = a * 2
    x[1:3, 0] = 2.5
    return x


case("setitem-number", _setitem_number, normal(4, 5))


def _setitem_twice(m, a, b, c):
    x = a * 1
    x[0] = b
    x[:, 1] = c
    return x


case("setitem-twice", _setitem_twice, normal(3, 4), normal(4), normal(3))

# --------------------------------------------------------------------------------- unbind / split / chunk
case("unbind-dim0", lambda m, a: a.unbind(0), normal(3, 4), gradgrad=True)
case("unbind-dim1", lambda m, a: m.unbind(a, 1), normal(3, 4))
case("unbind-negative-dim", lambda m, a: a.unbind(-1), normal(2, 3, 2))
case("split-size", lambda m, a: a.split(2), normal(5, 3), gradgrad=True)
case("split-size-dim1", lambda m, a: a.split(2, dim=1), normal(3, 5))
case("split-sizes", lambda m, a: m.split(a, [1, 3], dim=0), normal(4, 3))
case("split-sizes-dim-1", lambda m, a: a.split([2, 1, 2], -1), normal(3, 5))
case("chunk", lambda m, a: a.chunk(2), normal(4, 3))
case("chunk-uneven-dim1", lambda m, a: m.chunk(a, 3, dim=1), normal(3, 5))
case("split-then-combine", lambda m, a: a.split(1)[0] * a.split(1)[2], normal(3, 4))


# ------------------------------------------------------------------------------ in place, on non-leaves
def _inplace(method: str, *args, **kwargs):
    def fn(m, a, *others):
        y = a * 1
        getattr(y, method)(*others, *args, **kwargs)
        return y

    return fn


case("add_", _inplace("add_"), normal(3, 4), normal(3, 4), gradgrad=True)
case("add_-broadcast", _inplace("add_"), normal(3, 4), normal(4))
case("add_-alpha", _inplace("add_", alpha=2.0), normal(3, 4), normal(3, 4))
case("add_-number", _inplace("add_", 1.5), normal(3, 4))
case("sub_", _inplace("sub_"), normal(3, 4), normal(3, 1))
case("sub_-alpha", _inplace("sub_", alpha=0.5), normal(3, 4), normal(3, 4))
case("mul_", _inplace("mul_"), normal(3, 4), normal(3, 4), gradgrad=True)
case("mul_-broadcast", _inplace("mul_"), normal(3, 4), normal(4))
case("mul_-number", _inplace("mul_", 2.0), normal(3, 4))
case("div_", _inplace("div_"), normal(3, 4), away(3, 4), gradgrad=True)
case("div_-number", _inplace("div_", 4.0), normal(3, 4))
case("exp_", _inplace("exp_"), normal(3, 4), gradgrad=True)
case("log_", _inplace("log_"), positive(3, 4))
case("sqrt_", _inplace("sqrt_"), positive(3, 4))
case("abs_", _inplace("abs_"), away(3, 4))
case("neg_", _inplace("neg_"), normal(3, 4))
case("pow_-int", _inplace("pow_", 2), normal(3, 4), gradgrad=True)
case("pow_-float", _inplace("pow_", 1.5), positive(3, 4))
case("clamp_", _inplace("clamp_", -0.5, 0.5), away(3, 4))
case("clamp_-min-only", _inplace("clamp_", min=-0.5), away(3, 4))
case("relu_", _inplace("relu_"), away(3, 4))
case("sigmoid_", _inplace("sigmoid_"), normal(3, 4), gradgrad=True)
case("tanh_", _inplace("tanh_"), normal(3, 4))
case("copy_", _inplace("copy_"), normal(3, 4), normal(4))
case("fill_", _inplace("fill_", 1.5), normal(3, 4))
case("zero_", _inplace("zero_"), normal(3, 4))
case("add_-only-other-requires-grad", _inplace("add_"), normal(3, 4, grad=False), normal(3, 4))


def _inplace_chain(m, a, b, c, d):
    y = a * 1
    y.add_(b)
    y.mul_(c)
    y.sub_(d)
    y.div_(c)
    return y


def _inplace_after_use(m, a, b):
    y = a * 2
    z = y + b
    y.mul_(b)
    return z * y


def _augmented(m, a, b, c):
    y = a * 1
    y += b
    y *= c
    y -= b
    y /= c
    return y


def _through_view(view, method: str, *args):
    """``y = a * 1; view(y).method_(*others, *args); return y``: an in-place op through a view of a non-leaf."""

    def fn(m, a, *others):
        y = a * 1
        getattr(view(y), method)(*others, *args)
        return y

    return fn


case("view-row-mul_", _through_view(lambda y: y[1], "mul_"), normal(3, 4), normal(4), gradgrad=True)
case("view-column-add_", _through_view(lambda y: y[:, 0], "add_"), normal(3, 4), normal(3))
case("view-slice-exp_", _through_view(lambda y: y[::2], "exp_"), normal(3, 4))
case("view-transpose-mul_", _through_view(lambda y: y.t(), "mul_"), normal(3, 4), normal(4, 3))
case("view-reshape-add_", _through_view(lambda y: y.view(12), "add_"), normal(3, 4), normal(12))
case("view-row-mul_-number", _through_view(lambda y: y[0], "mul_", 3.0), normal(3, 4))


def _view_then_base(m, a, b):
    y = a * 1
    row = y[1]
    row.mul_(b)
    return y.sum(0) + row


case("view-inplace-then-both-used", _view_then_base, normal(3, 4), normal(4))

case("inplace-chain", _inplace_chain, normal(3, 4), normal(3, 4), away(3, 4), normal(4), gradgrad=True)
case("inplace-after-use", _inplace_after_use, normal(3, 4), normal(3, 4), gradgrad=True)
case("augmented-assignment", _augmented, normal(3, 4), normal(3, 4), away(3, 4), gradgrad=True)

# ------------------------------------------------------------------------------------------- compositions
case(
    "composite-mlp", lambda m, x, w, b: (x @ w + b).tanh().sum(1), normal(3, 4), normal(4, 2), normal(2), gradgrad=True
)
case(
    "composite-softmax-cross-entropy",
    lambda m, z: -(z.log_softmax(1)[m.const([0, 1, 2]), m.const([1, 0, 3])]).mean(),
    normal(3, 4),
    gradgrad=True,
)
case("composite-shared-input", lambda m, a: a * a.exp() - a.sigmoid() * a, normal(3, 4), gradgrad=True)

GRADGRAD_CASES = [c for c in CASES if c.gradgrad]
assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"


def _inputs(case: Case, device: str, rng: np.random.Generator) -> list:
    return [trainkit.tensor(draw(a, rng), device=device, requires_grad=a.grad) for a in case.args]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_gradcheck(case, device, rng):
    m = Lib(trainkit, device)
    inputs = _inputs(case, device, rng)
    assert gradcheck(lambda *xs: case.fn(m, *xs), inputs, eps=case.eps)


@pytest.mark.parametrize("case", GRADGRAD_CASES, ids=[c.id for c in GRADGRAD_CASES])
def test_gradgradcheck(case, device, rng):
    m = Lib(trainkit, device)
    inputs = _inputs(case, device, rng)
    assert gradgradcheck(lambda *xs: case.fn(m, *xs), inputs, eps=case.eps)


def test_gradcheck_detects_a_wrong_gradient(rng):
    """The checker itself must fail on a Function whose backward is off by a factor."""

    class WrongSquare(trainkit.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x

    x = trainkit.tensor(rng.standard_normal(4), requires_grad=True)
    with pytest.raises(trainkit.autograd.GradcheckError):
        gradcheck(WrongSquare.apply, (x,))
    assert gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False
