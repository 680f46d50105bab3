"""Element-wise ops and type promotion against PyTorch: values (NaN == NaN, signed zeros), dtypes, shapes,
requires_grad, node names, input gradients and exception classes, over float32/float64/int64/bool tensors, 0-d
tensors, Python numbers and edge values (0, -0.0, inf, NaN, ties)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import trainkit

INF, NAN = math.inf, math.nan
F = [1.5, -2.0, 0.0, -0.0, INF, -INF, NAN, 2.5, 0.5, -0.5]
G = [2.0, 2.0, 0.0, 3.0, INF, 1.0, 1.0, -0.5, 0.5, 1.0]
I = [3, -7, 0, 5, 8, -1, 2, 4, 1, -2]  # noqa: E741
J = [2, 2, 1, -3, 3, 5, -4, 1, 1, 2]
B = [True, False, True, False, True, True, False, False, True, False]


class T:
    """A tensor to make in each library: data, dtype name and requires_grad."""

    def __init__(self, data, dtype="float32", rg=False):
        self.data, self.dtype, self.rg = data, dtype, rg

    def __repr__(self):
        return f"T({self.dtype}{', rg' if self.rg else ''})"


def f32(d=F, rg=True):
    return T(d, "float32", rg)


def f64(d=F, rg=True):
    return T(d, "float64", rg)


def i64(d=I):
    return T(d, "int64")


def b(d=B):
    return T(d, "bool")


def _make(lib, spec):
    if isinstance(spec, T):
        return lib.tensor(spec.data, dtype=getattr(lib, spec.dtype), requires_grad=spec.rg)
    return spec


def _summary(t):
    node = None if t.grad_fn is None else type(t.grad_fn).__name__
    return tuple(t.shape), str(t.dtype).rsplit(".", 1)[-1], bool(t.requires_grad), node, np.array(t.detach().numpy())


def _run(lib, fn, specs):
    inputs = [_make(lib, s) for s in specs]
    try:
        out = fn(lib, *inputs)
    except Exception as err:  # noqa: BLE001  (the class is what is compared)
        return ("raise", type(err).__name__), None
    outs = list(out) if isinstance(out, tuple) else [out]
    result = [_summary(o) for o in outs]
    wanted = [o for o in outs if o.requires_grad]
    grads = None
    if wanted:
        try:
            lib.autograd.backward(wanted, [lib.ones_like(o) for o in wanted])
        except Exception as err:  # noqa: BLE001
            return result, ("raise", type(err).__name__)
        grads = [None if not isinstance(x, lib.Tensor) or x.grad is None else _summary(x.grad) for x in inputs]
    return result, grads


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    a, b = a.astype(np.float64), b.astype(np.float64)
    close = np.isclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
    zeros = (a == 0) & (b == 0)
    return bool(close.all() and (np.signbit(a[zeros]) == np.signbit(b[zeros])).all())


def _assert_same(tk, th, what):
    if th is None or tk is None:
        assert tk is th, f"{what}: {tk!r} != torch's {th!r}"
        return
    if th[0] == "raise" or tk[0] == "raise":
        assert tk == th, f"{what}: {tk!r} != torch's {th!r}"
        return
    assert len(tk) == len(th), what
    for i, (x, y) in enumerate(zip(tk, th)):
        if x is None or y is None:
            assert x is y, f"{what} {i}: {x!r} != torch's {y!r}"
            continue
        assert x[:4] == y[:4], f"{what} {i}: (shape, dtype, requires_grad, node) {x[:4]} != torch's {y[:4]}"
        assert _same_values(x[4], y[4]), f"{what} {i}: {x[4].tolist()} != torch's {y[4].tolist()}"


def _div(mode):
    return lambda lib, x, y: lib.div(x, y, rounding_mode=mode)


CASES = {
    # integer and bool inputs of floating functions give float32
    "exp-int": (lambda lib, x: lib.exp(x), i64()),
    "log-bool": (lambda lib, x: lib.log(x), b()),
    "sqrt-int0d": (lambda lib, x: x.sqrt(), T(3, "int64")),
    "reciprocal-bool": (lambda lib, x: lib.reciprocal(x), b()),
    "clamp-int-float-bounds": (lambda lib, x: lib.clamp(x, 0.5, 2.5), i64()),
    "clamp-int-float-max": (lambda lib, x: lib.clamp(x, max=1.0), i64()),
    "where-two-floats": (lambda lib, x: lib.where(x > 0, 1.0, 0.0), f32()),
    # conversions to integers and bools leave the graph
    "long": (lambda lib, x: x.long(), f32()),
    "int": (lambda lib, x: x.int(), f32()),
    "bool": (lambda lib, x: x.bool(), f32()),
    "to-int64": (lambda lib, x: x.to(lib.int64), f64()),
    "type_as-int": (lambda lib, x: x.type_as(lib.tensor([1])), f32()),
    "double-keeps-graph": (lambda lib, x: x.double(), f32()),
    # bitwise and logical operators
    "and-int": (lambda lib, x, y: x & y, i64(), i64(J)),
    "or-int-bool": (lambda lib, x, y: x | y, i64(), b()),
    "xor-int-number": (lambda lib, x: x ^ True, i64()),
    "rand-number": (lambda lib, x: 2 & x, i64()),
    "and-float": (lambda lib, x, y: x & y, f32(), f32(G)),
    "and-bool": (lambda lib, x, y: x & y, b(), b(B[::-1])),
    "invert-int": (lambda lib, x: ~x, i64()),
    "invert-bool": (lambda lib, x: ~x, b()),
    "invert-float": (lambda lib, x: ~x, f32()),
    "lshift": (lambda lib, x: x << 1, i64()),
    "logical_and-number": (lambda lib, x: lib.logical_and(x, 1), f32()),
    # sign, abs, neg, square
    "sign": (lambda lib, x: lib.sign(x), f32()),
    "sign-0d": (lambda lib, x: x.sign(), T(-0.0, "float32", True)),
    "sign-bool": (lambda lib, x: x.sign(), b()),
    "abs-nan-grad": (lambda lib, x: x.abs(), f32()),
    "abs-bool": (lambda lib, x: lib.abs(x), b()),
    "neg-bool": (lambda lib, x: -x, b()),
    "square-bool": (lambda lib, x: lib.square(x), b()),
    "sub-bool": (lambda lib, x, y: x - y, f32(), b()),
    "sub-true": (lambda lib, x: x - True, i64()),
    # division, remainder, fmod
    "div-floor": (_div("floor"), f32(), f32(G)),
    "div-trunc-int": (_div("trunc"), i64(), i64(J)),
    "div-floor-int-number": (_div("floor"), i64(), -3),
    "div-floor-int-zero": (_div("floor"), i64(), i64([0] * 10)),
    "div-floor-bool": (_div("floor"), b(), True),
    "floordiv": (lambda lib, x, y: x // y, f32(), f32(G)),
    "rfloordiv": (lambda lib, x: 2 // x, f32()),
    "floordiv-int": (lambda lib, x: x // -2, i64()),
    "mod": (lambda lib, x, y: x % y, f32(), f32(G)),
    "mod-number": (lambda lib, x: x % -2.0, f32()),
    "rmod": (lambda lib, x: 2 % x, f32()),
    "remainder-0d": (lambda lib, x, y: lib.remainder(x, y), f32(), T(2, "int64")),
    "remainder-int": (lambda lib, x, y: lib.remainder(x, y), i64(), i64(J)),
    "fmod": (lambda lib, x, y: lib.fmod(x, y), f32(), f32(G)),
    "fmod-float-by-int-zero": (lambda lib, x: lib.fmod(x, 0), f32()),
    "fmod-int-by-zero": (lambda lib, x: lib.fmod(x, 0), i64()),
    "fmod-bool": (lambda lib, x, y: lib.fmod(x, y), b(), b()),
    "fmod-number-first": (lambda lib, x: lib.fmod(2.0, x), f32()),
    "rsub-tensors": (lambda lib, x, y: lib.rsub(x, y), f32(), f32(G)),
    "rsub-number-first": (lambda lib, x: lib.rsub(2, x), f32()),
    "rsub-operator": (lambda lib, x: 2 - x, f32()),
    "div-number": (lambda lib, x: x / 2, f32()),
    "rdiv-number": (lambda lib, x: 2 / x, f32()),
    # pow
    "pow-tensor-grad-at-zero": (lambda lib, x, y: x**y, f32(), f32(G)),
    "pow-0d-zero-exponent": (lambda lib, x, y: x**y, f32(), T(0, "int64")),
    "pow-zero": (lambda lib, x: x**0, f32()),
    "pow-minus-half": (lambda lib, x: x**-0.5, f32()),
    "rpow-zero-base": (lambda lib, x: 0**x, f32()),
    "rpow-negative-base": (lambda lib, x: (-2) ** x, f32()),
    "rpow-int": (lambda lib, x: 2**x, i64()),
    "pow-int-negative-number": (lambda lib, x: x**-1, i64()),
    "pow-int-negative-tensor": (lambda lib, x, y: x**y, i64(), i64(J)),
    "pow-bool-true": (lambda lib, x: x**True, b()),
    "pow-bool-two": (lambda lib, x: x**2, b()),
    "pow-bool-bool": (lambda lib, x, y: x**y, b(), b()),
    "pow-int-float": (lambda lib, x: lib.pow(x, 0.5), i64()),
    # maximum, minimum, clamp
    "maximum-ties-nan": (lambda lib, x, y: lib.maximum(x, y), f32(), f32(G)),
    "minimum-ties-nan": (lambda lib, x, y: lib.minimum(x, y), f32(), f32(G)),
    "maximum-number": (lambda lib, x: lib.maximum(x, 1.0), f32()),
    "minimum-number-first": (lambda lib, x: lib.minimum(1, x), f32()),
    "clamp-signed-zero": (lambda lib, x: lib.clamp(x, min=0.0), f32()),
    "clamp-tensors": (
        lambda lib, x, lo, hi: lib.clamp(x, lo, hi),
        f32(),
        f32([0.0, -1, 0, 1, 0, 0, 0, NAN, 0.5, 1]),
        f32([1.0, 1, 0, 0.5, 1, 1, 1, 1, NAN, 0]),
    ),
    "clamp-tensor-min": (lambda lib, x, lo: lib.clamp(x, lo), f32(), f32(G)),
    "clamp-tensor-max": (lambda lib, x, hi: lib.clamp(x, None, hi), f32(), f32(G)),
    "clamp_min-tensor": (lambda lib, x, lo: lib.clamp_min(x, lo), f32(), f32(G)),
    "clamp_max-tensor": (lambda lib, x, hi: lib.clamp_max(x, hi), f32(), f32(G)),
    "clamp-tensor-and-number": (lambda lib, x, lo: lib.clamp(x, lo, 1.0), f32(), f32(G)),
    "clamp-int-tensors": (lambda lib, x, lo, hi: lib.clamp(x, lo, hi), i64(), i64([0] * 10), i64([3] * 10)),
    "clamp-float-int-bound": (lambda lib, x, lo: lib.clamp(x, lo), f32(), i64([0] * 10)),
    "clamp_-tensors": (lambda lib, x, lo, hi: (x * 1).clamp_(lo, hi), f32(), f32(G), f32([3.0] * 10)),
    "clamp_-int-tensor": (lambda lib, x, lo: x.clone().clamp_(lo), i64(), i64([0] * 10)),
    "clamp_-int-float": (lambda lib, x: x.clone().clamp_(0.5), i64()),
    # lerp, addcmul, atan2, isclose, rounding
    "lerp-inf": (lambda lib, x, e: lib.lerp(x, e, 0.5), f32(), f32([1.0, INF, -INF, 2, INF, 0, 1, NAN, 3, 1])),
    "lerp-weight-one": (lambda lib, x, e: lib.lerp(x, e, 1.0), f32(), f32([1.0, INF, -INF, 2, INF, 0, 1, NAN, 3, 1])),
    "lerp-tensor-weight": (lambda lib, x, e, w: lib.lerp(x, e, w), f32(), f32(G), f32(J)),
    "lerp-dtypes": (lambda lib, x, e: lib.lerp(x, e, 0.5), f32(), f64(G)),
    "lerp-int": (lambda lib, x, e: lib.lerp(x, e, 0.5), i64(), i64(J)),
    "lerp_": (lambda lib, x, e: (x * 1).lerp_(e, 0.3), f32(), f32(G)),
    "addcmul-int-value": (lambda lib, x, y, z: lib.addcmul(x, y, z, value=0.5), i64(), i64(), i64(J)),
    "addcdiv_": (lambda lib, x, y, z: (x * 1).addcdiv_(y, z, value=2), f32(), f32(G), f32(J)),
    "atan2-origin": (lambda lib, x, y: lib.atan2(x, y), f32(), f32(G)),
    "atan2-number": (lambda lib, x: lib.atan2(x, 2.0), f32()),
    "isclose-dtypes": (lambda lib, x, y: lib.isclose(x, y), i64(), f32()),
    "isclose-number": (lambda lib, x: lib.isclose(x, 1.5), f32()),
    "floor-bool": (lambda lib, x: lib.floor(x), b()),
    "round-bool": (lambda lib, x: lib.round(x), b()),
    "round-decimals-int": (lambda lib, x: lib.round(x, decimals=1), i64()),
    # in place
    "div_-rounding": (lambda lib, x: (x * 1).div_(2, rounding_mode="floor"), f32()),
    "div_-rounding-int": (lambda lib, x: x.clone().div_(-2, rounding_mode="trunc"), i64()),
    "pow_-0d": (lambda lib, x, y: (x * 1).pow_(y), f32(), T(2.0, "float32")),
    "pow_-int-negative": (lambda lib, x: x.clone().pow_(-1), i64()),
    "imod": (lambda lib, x: (x * 1).__imod__(2), f32()),
    "ifloordiv-int": (lambda lib, x: x.clone().__ifloordiv__(2), i64()),
    "iand-int": (lambda lib, x: x.clone().__iand__(6), i64()),
    "sign_": (lambda lib, x: (x * 1).sign_(), f32()),
    "view-of-leaf-div_": (lambda lib, x: x[1:].div_(2, rounding_mode="floor"), f32()),
    "view-of-leaf-clamp_": (lambda lib, x, lo: x[1:].clamp_(lo[1:]), f32(), f32(G)),
    "view-of-leaf-lerp_": (lambda lib, x, e: x.view(2, 5)[0].lerp_(e[:5], 0.5), f32(), f32(G)),
    "view-clamp_-tensor": (lambda lib, x, lo: (lambda y: (y[1:].clamp_(lo[1:]), y)[1])(x * 1), f32(), f32(G)),
    "int-div_": (lambda lib, x: x.clone().div_(2), i64()),
    # empty and 0-d
    "empty-maximum": (lambda lib, x, y: lib.maximum(x, y), f32([]), f32([])),
    "empty-sign": (lambda lib, x: x.sign(), f32([])),
    "0d-remainder": (lambda lib, x, y: x % y, T(-3.0, "float32", True), T(2.0, "float32", True)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name, torch):
    fn, *specs = CASES[name]
    tk_out, tk_grads = _run(trainkit, fn, specs)
    th_out, th_grads = _run(torch, fn, specs)
    _assert_same(tk_out, th_out, "output")
    _assert_same(tk_grads, th_grads, "input gradients")


def test_node_names_of_overloads(torch):
    """PyTorch's suffixes: the node says which overload ran (a scalar or a tensor operand, a rounding mode)."""
    cases = [
        lambda lib, x, y: x**2,
        lambda lib, x, y: x**y,
        lambda lib, x, y: 2**x,
        lambda lib, x, y: 2 - x,
        lambda lib, x, y: lib.rsub(x, y),
        lambda lib, x, y: x.div(y, rounding_mode="trunc"),
        lambda lib, x, y: x % 2,
        lambda lib, x, y: x % y,
        lambda lib, x, y: lib.fmod(x, 2),
        lambda lib, x, y: lib.fmod(x, y),
        lambda lib, x, y: x.clamp(0, 1),
        lambda lib, x, y: x.clamp_min(0),
        lambda lib, x, y: x.clamp_max(y),
        lambda lib, x, y: x.clamp(y),
        lambda lib, x, y: x.clamp_min(y),
        lambda lib, x, y: lib.lerp(x, y, y),
        lambda lib, x, y: (x * 1).clamp_(y),
        lambda lib, x, y: (x * 1).pow_(y),
        lambda lib, x, y: x.sign(),
    ]
    for i, case in enumerate(cases):
        names = []
        for lib in (trainkit, torch):
            x = lib.tensor([1.5, -2.0, 0.0], requires_grad=True)
            y = lib.tensor([2.0, 3.0, 1.0], requires_grad=True)
            names.append(case(lib, x, y).grad_fn.name())
        assert names[0] == names[1], f"case {i}: {names[0]} != torch's {names[1]}"


def test_floor_divide_has_no_derivative(torch):
    for lib in (trainkit, torch):
        x = lib.tensor([1.5, -2.0], requires_grad=True)
        out = x // 2
        assert out.requires_grad and out.grad_fn.name() == "torch::autograd::NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
            out.sum().backward()


def test_integer_powers_and_error_messages(torch):
    for lib in (trainkit, torch):
        with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed."):
            lib.tensor([1, 2]) ** -2
        with pytest.raises(
            RuntimeError, match="a view of a leaf Variable that requires grad is being used in an in-place operation."
        ):
            lib.ones(3, requires_grad=True)[1:].mul_(2)


def test_float32_path_keeps_float32():
    x = trainkit.tensor([1.0, -2.0, 0.5], requires_grad=True)
    for out in (x * 2, x + x, x / 3, x - 1, 2 - x, x**2, trainkit.maximum(x, x * 2), trainkit.clamp(x, 0, 1)):
        assert out.dtype == trainkit.float32
        (g,) = trainkit.autograd.grad(out.sum(), x)
        assert g.dtype == trainkit.float32


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"])
def test_comparisons_of_shapes_that_do_not_broadcast_raise_runtime_error(op):
    import torch

    for lib in (trainkit, torch):
        with pytest.raises(RuntimeError, match="must match the size"):
            getattr(lib, op)(lib.ones(2, 3), lib.ones(4))
