"""The argument templates, one family of ops at a time, and the case universe they make.

``configs()`` lists every configured call once, in a fixed order; a case id is ``op|arguments`` (and
``|dN`` for the N-th redraw of the same arguments with other random values in a long run). Ops are named
``torch.X``, ``Tensor.X`` (methods and operators, ``Tensor.__add__``) and ``F.X`` (``nn.functional``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .harness import Case, D, T, describe
from .sequence_cases import sequences
from .surface import SKIPPED, surface_names
from .view_cases import views_inplace

INF, NAN = math.inf, math.nan
FLOATS = ("f32", "f64")
ALL_DTYPES = ("f32", "f64", "i64", "b")
SHAPES = ((), (5,), (2, 3), (2, 0, 3), (2, 3, 4), (1, 2, 3, 2))


class Builder:
    def __init__(self):
        self.cases: list[Case] = []
        self.ids: set[str] = set()
        self.surface = set(surface_names())

    def add(self, op: str, fn, *args, values: bool = True, **kwargs) -> None:
        text = ",".join(describe(a) for a in args)
        if kwargs:
            text += ";" + ",".join(f"{k}={describe(v)}" for k, v in kwargs.items())
        cid = f"{op}|{text}"
        n = 1
        while cid in self.ids:  # the same arguments twice: a stable suffix by order of appearance
            n += 1
            cid = f"{op}|{text}#{n}"
        self.ids.add(cid)
        self.cases.append(Case(op, cid, fn, args, kwargs, values))

    def call(self, op: str, *args, values: bool = True, **kwargs) -> None:
        """One call of ``op`` (``F.conv1d``, ``torch.add``, ``Tensor.sum``) with these arguments."""
        self.add(op, caller(op), *args, values=values, **kwargs)

    def each(self, name: str, *args, namespaces=("torch", "Tensor"), values: bool = True, **kwargs) -> None:
        """One call of ``name`` in each namespace the surface lists it in."""
        for space in forms_of(name, namespaces):
            if space in self.surface:
                self.add(space, caller(space), *args, values=values, **kwargs)


def forms_of(name: str, namespaces) -> list[str]:
    prefix = {"torch": "torch.", "Tensor": "Tensor.", "F": "F."}
    return [prefix[n] + name for n in namespaces]


def caller(op: str):
    space, name = op.split(".", 1)
    if space == "torch":
        return functools.partial(call_module, name)
    if space == "F":
        return functools.partial(call_functional, name)
    return functools.partial(call_method, name)


def call_module(name, L, *args, **kwargs):
    return getattr(L, name)(*args, **kwargs)


def call_functional(name, L, *args, **kwargs):
    return getattr(L.nn.functional, name)(*args, **kwargs)


def call_method(name, L, x, *args, **kwargs):
    return getattr(x, name)(*args, **kwargs)


def call_inplace(name, L, x, *args, **kwargs):
    """An in-place method on a non-leaf copy when ``x`` requires grad (torch refuses to write into such a
    leaf), and on ``x`` itself otherwise (so that writing into an expanded view is tried); the result, and
    whether it is the tensor written into."""
    y = x.clone() if x.requires_grad else x
    out = getattr(y, name)(*args, **kwargs)
    return out, out is y


def call_attribute(name, L, x):
    return getattr(x, name)


# --- element-wise -------------------------------------------------------------------------------------------

UNARY = {
    "abs": "any",
    "absolute": "any",
    "acos": "unit",
    "asin": "unit",
    "atan": "any",
    "ceil": "any",
    "cos": "any",
    "cosh": "any",
    "erf": "any",
    "exp": "any",
    "exp2": "any",
    "expm1": "any",
    "floor": "any",
    "frac": "any",
    "log": "pos",
    "log10": "pos",
    "log1p": "pos",
    "log2": "pos",
    "neg": "any",
    "negative": "any",
    "reciprocal": "any",
    "round": "any",
    "rsqrt": "pos",
    "sigmoid": "any",
    "sign": "any",
    "sin": "any",
    "sinh": "any",
    "sqrt": "pos",
    "square": "any",
    "tan": "any",
    "tanh": "any",
    "trunc": "any",
    "relu": "any",
    "isfinite": "any",
    "isinf": "any",
    "isnan": "any",
    "logical_not": "any",
    "bitwise_not": "any",
    "sgn": "any",
    "signbit": "any",
    "erfc": "any",
    "asinh": "any",
    "acosh": "pos",
    "atanh": "unit",
    "arcsin": "unit",
    "arccos": "unit",
    "arctan": "any",
    "arcsinh": "any",
    "arccosh": "pos",
    "arctanh": "unit",
    "deg2rad": "any",
    "rad2deg": "any",
    "logit": "prob",
    "nan_to_num": "any",
    "positive": "any",
    "fix": "any",
}
UNARY_INPLACE = (
    "abs_",
    "exp_",
    "log_",
    "neg_",
    "relu_",
    "sigmoid_",
    "sqrt_",
    "tanh_",
    "acos_",
    "asin_",
    "atan_",
    "ceil_",
    "cos_",
    "cosh_",
    "erf_",
    "exp2_",
    "expm1_",
    "floor_",
    "frac_",
    "log10_",
    "log1p_",
    "log2_",
    "logical_not_",
    "reciprocal_",
    "round_",
    "rsqrt_",
    "sign_",
    "sin_",
    "sinh_",
    "square_",
    "tan_",
    "trunc_",
    "bitwise_not_",
    "sgn_",
    "erfc_",
    "asinh_",
    "acosh_",
    "atanh_",
    "arcsin_",
    "arccos_",
    "arctan_",
    "arcsinh_",
    "arccosh_",
    "arctanh_",
    "deg2rad_",
    "rad2deg_",
    "logit_",
    "nan_to_num_",
    "fix_",
)
F_UNARY = ("relu", "sigmoid", "tanh", "gelu", "softplus", "leaky_relu", "silu", "mish", "hardswish", "elu")


def unary_inputs(domain: str) -> list[T]:
    inputs = [T(s, dt, domain=domain if dt in FLOATS else "any") for dt in ALL_DTYPES for s in SHAPES]
    inputs += [T((3, 4), "f32", layout, domain=domain) for layout in ("T", "s", "e")]
    inputs += [T((4, 5), "f32", domain="edge"), T((4, 5), "f64", domain="edge"), T((6,), "i64", domain="edge")]
    if domain != "any":
        inputs.append(T((2, 3), "f32"))
    return inputs


def elementwise_unary(b: Builder) -> None:
    for name, domain in UNARY.items():
        for x in unary_inputs(domain):
            b.each(name, x)
    b.each("round", T((3, 4), "f32"), decimals=2)
    b.each("round", T((3, 4), "f64", domain="edge"), decimals=-1)
    for x in (T((3, 4), "f32", domain="edge"), T((3, 4), "f64"), T((2, 3), "i64")):
        b.each("logit", x, eps=1e-6)
        b.each("logit", x, 0.25)
        b.each("nan_to_num", x, nan=1.5, posinf=2.0, neginf=-3.0)
        b.each("nan_to_num", x, 0.5)
    for name in UNARY_INPLACE:
        domain = UNARY.get(name[:-1], "any")
        for x in [T((2, 3), dt, domain=domain) for dt in ALL_DTYPES] + [
            T((2, 3), "f32", domain=domain, grad=False),
            T((3, 4), "f32", "e", domain=domain, grad=False),
            T((3, 4), "f32", "T", domain=domain),
            T((), "f32", domain=domain),
            T((4, 5), "f32", domain="edge"),
        ]:
            b.add(f"Tensor.{name}", functools.partial(call_inplace, name), x)
    for name in F_UNARY:
        for x in unary_inputs("any"):
            b.add(f"F.{name}", caller(f"F.{name}"), x)
    for kwargs in ({"approximate": "tanh"}, {"approximate": "bad"}):
        b.add("F.gelu", caller("F.gelu"), T((3, 4), "f32"), **kwargs)
    for kwargs in ({"beta": 2.0}, {"beta": 0.5, "threshold": 1.0}):
        b.add("F.softplus", caller("F.softplus"), T((3, 4), "f32", domain="edge"), **kwargs)
    for kwargs in ({"negative_slope": 0.2}, {"negative_slope": -1.5}):
        b.add("F.leaky_relu", caller("F.leaky_relu"), T((3, 4), "f32"), **kwargs)
    b.add("F.relu", caller("F.relu"), T((3, 4), "f32", grad=False), inplace=True)
    b.add("F.leaky_relu", caller("F.leaky_relu"), T((3, 4), "f32", grad=False), 0.1, True)
    for name in ("silu", "mish", "hardswish", "elu"):
        b.add(f"F.{name}", caller(f"F.{name}"), T((3, 4), "f32", grad=False), inplace=True)
    for alpha in (0.5, -0.7):
        b.add("F.elu", caller("F.elu"), T((3, 4), "f32", domain="edge"), alpha=alpha)


BINARY = (
    "add",
    "sub",
    "mul",
    "div",
    "true_divide",
    "divide",
    "floor_divide",
    "fmod",
    "remainder",
    "pow",
    "atan2",
    "xlogy",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "multiply",
    "subtract",
    "rsub",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
)


def binary_pairs() -> list[tuple]:
    f = T
    pairs = [
        (f((2, 3)), f((2, 3))),
        (f((2, 3)), f((3,))),
        (f((2, 1, 3)), f((4, 1))),
        (f(()), f((2, 3))),
        (f((2, 3)), f(())),
        (f(()), f(())),
        (f((0, 3)), f((3,))),
        (f((2, 3)), f((4,))),
        (f((3, 4), layout="T"), f((3, 4), layout="s")),
        (f((3, 4), layout="e"), f((4,))),
        (f((2, 3)), f((2, 3), "f64")),
        (f((2, 3)), f((2, 3), "i64")),
        (f((2, 3), "i64"), f((2, 3), "i64")),
        (f((2, 3), "i64"), f((2, 3), "b")),
        (f((2, 3), "b"), f((2, 3), "b")),
        (f((2, 3), "f64"), f((3,), "b")),
        (f((2, 3), "i64"), f((), "f32")),
        (f((2, 3)), f((), "f64")),
        (f((2, 3), "i64"), f((), "f64")),
        (f((), "f64"), f((2, 3), "i64")),
        (f((2, 3), "b"), f((), "i64")),
        (f((2, 3)), 2.5),
        (f((2, 3)), 3),
        (f((2, 3)), True),
        (f((2, 3), "i64"), 2.5),
        (f((2, 3), "i64"), 3),
        (f((2, 3), "i64"), -2),
        (f((2, 3), "b"), True),
        (f((2, 3), "b"), 2),
        (f((2, 3)), 0.0),
        (2.5, f((2, 3))),
        (f((4, 5), domain="edge"), f((4, 5), domain="edge")),
        (f((4, 5), "f64", domain="edge"), f((5,), "f64")),
        (f((4,), "i64", value=[7, -7, 0, 3]), f((4,), "i64", value=[2, 2, 0, -2])),
        (f((4,), "i64", value=[7, -7, 5, 3]), f((4,), "i64", value=[2, -3, 0, -2])),
        (f((6,), "i64", domain="edge"), f((6,), "i64", domain="pos")),
        (f((3,), value=[1.0, -1.0, 0.0]), f((3,), value=[0.0, 0.0, 0.0])),
    ]
    return pairs


def elementwise_binary(b: Builder) -> None:
    for name in BINARY:
        for x, y in binary_pairs():
            b.each(name, x, y)
    for name in ("add", "sub"):
        b.each(name, T((2, 3)), T((2, 3)), alpha=2)
        b.each(name, T((2, 3), "i64"), T((2, 3), "i64"), alpha=0.5)
        b.each(name, T((2, 3)), 1.5, alpha=-1)
    for mode in ("trunc", "floor", "bad"):
        for x, y in (
            (T((2, 3)), T((2, 3))),
            (T((4,), "i64", value=[7, -7, 5, 3]), T((4,), "i64", value=[2, 2, 3, -2])),
        ):
            b.each("div", x, y, rounding_mode=mode)
    for name in (
        "add_",
        "sub_",
        "mul_",
        "div_",
        "pow_",
        "atan2_",
        "xlogy_",
        "bitwise_and_",
        "bitwise_or_",
        "bitwise_xor_",
        "clamp_max_",
        "clamp_min_",
        "floor_divide_",
        "fmod_",
        "remainder_",
    ):
        for x, y in [
            (T((2, 3)), T((2, 3))),
            (T((2, 3)), T((3,))),
            (T((3,)), T((2, 3))),
            (T((2, 3), "i64"), 2.5),
            (T((2, 3), "i64"), T((2, 3), "i64")),
            (T((2, 3)), T((2, 3), "f64")),
            (T((2, 3)), 2),
            (T((2, 3), "b"), True),
            (T((3, 4), "f32", "e", grad=False), 1.0),
            (T((2, 3), "f64"), T(())),
        ]:
            b.add(f"Tensor.{name}", functools.partial(call_inplace, name), x, y)


OPERATORS = {
    "__add__": lambda x, y: x + y,
    "__sub__": lambda x, y: x - y,
    "__mul__": lambda x, y: x * y,
    "__truediv__": lambda x, y: x / y,
    "__floordiv__": lambda x, y: x // y,
    "__mod__": lambda x, y: x % y,
    "__pow__": lambda x, y: x**y,
    "__and__": lambda x, y: x & y,
    "__or__": lambda x, y: x | y,
    "__xor__": lambda x, y: x ^ y,
    "__lt__": lambda x, y: x < y,
    "__le__": lambda x, y: x <= y,
    "__gt__": lambda x, y: x > y,
    "__ge__": lambda x, y: x >= y,
    "__eq__": lambda x, y: x == y,
    "__ne__": lambda x, y: x != y,
}
REFLECTED = {
    "__radd__": lambda x, y: y + x,
    "__rsub__": lambda x, y: y - x,
    "__rmul__": lambda x, y: y * x,
    "__rtruediv__": lambda x, y: y / x,
    "__rfloordiv__": lambda x, y: y // x,
    "__rpow__": lambda x, y: y**x,
    "__rmod__": lambda x, y: y % x,
    "__rand__": lambda x, y: y & x,
    "__ror__": lambda x, y: y | x,
}
UNARY_OPERATORS = {
    "__neg__": lambda x: -x,
    "__invert__": lambda x: ~x,
    "__abs__": lambda x: abs(x),
    "__pos__": lambda x: +x,
    "__bool__": lambda x: bool(x),
    "__float__": lambda x: float(x),
    "__int__": lambda x: int(x),
    "__len__": lambda x: len(x),
}


def _operator(fn, L, *args):
    return fn(*args)


def _augmented(symbol, L, x, y):
    y0 = x.clone() if x.requires_grad else x
    target = y0
    target = {
        "+": lambda a: a.__iadd__(y),
        "-": lambda a: a.__isub__(y),
        "*": lambda a: a.__imul__(y),
        "/": lambda a: a.__itruediv__(y),
    }[symbol](target)
    return target, target is y0


def operators(b: Builder) -> None:
    for name, fn in OPERATORS.items():
        for x, y in binary_pairs():
            if isinstance(x, T):
                b.add(f"Tensor.{name}", functools.partial(_operator, fn), x, y)
    for name, fn in REFLECTED.items():
        for x in (T((2, 3)), T((2, 3), "i64"), T((2, 3), "b"), T(()), T((4, 5), domain="edge")):
            for y in (2.5, 3, True, -1):
                b.add(f"Tensor.{name}", functools.partial(_operator, fn), x, y)
    for name, fn in UNARY_OPERATORS.items():
        for x in (
            T((2, 3)),
            T((2, 3), "i64"),
            T((2, 3), "b"),
            T(()),
            T((), "i64"),
            T((1,)),
            T((0,)),
            T((4, 5), domain="edge"),
        ):
            b.add(f"Tensor.{name}", functools.partial(_operator, fn), x)
    for symbol, name in (("+", "__iadd__"), ("-", "__isub__"), ("*", "__imul__"), ("/", "__itruediv__")):
        for x, y in [
            (T((2, 3)), T((2, 3))),
            (T((2, 3)), 2),
            (T((2, 3), "i64"), 2),
            (T((2, 3), "i64"), 1.5),
            (T((2, 3)), T((3,))),
            (T((3,)), T((2, 3))),
            (T((3, 4), "f32", "e", grad=False), 1.0),
        ]:
            b.add(f"Tensor.{name}", functools.partial(_augmented, symbol), x, y)
    for x, y in [(T((2, 3)), T((3, 4))), (T((3,)), T((3,))), (T((2, 3)), T((4, 2)))]:
        b.add("Tensor.__matmul__", functools.partial(_operator, lambda x, y: x @ y), x, y)


def ternary(b: Builder) -> None:
    clamp_inputs = (
        T((2, 3)),
        T((2, 3), "f64"),
        T((2, 3), "i64"),
        T((4, 5), domain="edge"),
        T(()),
        T((3, 4), layout="T"),
        T((2, 3), "b"),
    )
    clamp_bounds = (
        {"min": -0.5, "max": 0.5},
        {"min": -0.5},
        {"max": 0.5},
        {},
        {"min": 1.0, "max": -1.0},
        {"min": -1, "max": 2},
        {"min": T((3,)), "max": T((2, 3))},
        {"min": T((3,))},
        {"min": T((), "f64"), "max": 1.0},
        {"min": -1.5, "max": None},
    )
    for name in ("clamp", "clip"):
        for x in clamp_inputs:
            for bounds in clamp_bounds:
                b.each(name, x, **bounds)
        for x in clamp_inputs[:4]:
            for bounds in clamp_bounds[:4]:
                b.add(f"Tensor.{name}_", functools.partial(call_inplace, f"{name}_"), x, **bounds)
    for name, bound in (("clamp_min", -0.5), ("clamp_max", 0.5)):
        for x in clamp_inputs:
            for value in (bound, T((3,)), int(bound * 2)):
                b.each(name, x, value)
    cond = T((2, 3), "b")
    for args in [
        (cond, T((2, 3)), T((2, 3))),
        (T((3,), "b"), T((2, 3)), T((2, 1))),
        (cond, 1.5, T((2, 3))),
        (cond, T((2, 3)), 0),
        (cond, T((2, 3)), T((2, 3), "f64")),
        (cond, T((2, 3), "i64"), T((2, 3))),
        (cond, 1.0, 0.0),
        (cond, 1, 0),
        (T((2, 3)), T((2, 3)), T((2, 3))),
        (cond, T((2, 3)), T((4,))),
        (T((), "b"), T((2, 3)), T(())),
        (cond, T((2, 3), "i64"), 2.5),
    ]:
        b.add("torch.where", caller("torch.where"), *args)
        b.add("Tensor.where", lambda L, c, x, y: x.where(c, y), *args)
    for c in (cond, T((2, 0), "b"), T((), "b"), T((2, 3, 2), "b")):
        b.add("torch.where", caller("torch.where"), c)
    lerp_args = [
        (T((2, 3)), T((2, 3)), 0.3),
        (T((2, 3)), T((3,)), T((2, 1))),
        (T((2, 3)), T((2, 3)), T(())),
        (T((2, 3)), T((2, 3), "f64"), 0.5),
        (T((2, 3), "i64"), T((2, 3), "i64"), 0.5),
        (T((2, 3)), T((2, 3)), 2),
        (T((4, 5), domain="edge"), T((4, 5)), 0.7),
        (T((2, 3)), T((4,)), 0.5),
    ]
    for args in lerp_args:
        b.each("lerp", *args)
        b.add("Tensor.lerp_", functools.partial(call_inplace, "lerp_"), *args)
    for name in ("addcmul", "addcdiv"):
        for args, kwargs in [
            ((T((2, 3)), T((2, 3)), T((2, 3), domain="pos")), {}),
            ((T((2, 3)), T((3,)), T((2, 1), domain="pos")), {"value": 0.5}),
            ((T((2, 3)), T((2, 3)), T((2, 3), domain="pos")), {"value": -2}),
            ((T((2, 3), "i64"), T((2, 3), "i64"), T((2, 3), "i64", domain="pos")), {}),
            ((T((2, 3)), T((2, 3), "f64"), T((2, 3))), {}),
            ((T(()), T((2, 3)), T((3,))), {}),
            ((T((2, 3)), T((2, 3)), T((4,))), {}),
        ]:
            b.each(name, *args, **kwargs)
            b.add(f"Tensor.{name}_", functools.partial(call_inplace, f"{name}_"), *args, **kwargs)
    for name in ("isclose", "allclose", "equal", "dist"):
        for x, y in [
            (T((2, 3)), T((2, 3))),
            (T((2, 3)), T((3,))),
            (T((3,), value=[1.0, NAN, INF]), T((3,), value=[1.0 + 1e-9, NAN, INF])),
            (T((2, 3), "i64"), T((2, 3), "i64")),
            (T((2, 3)), T((2, 3), "f64")),
            (T((2, 3)), T((4,))),
        ]:
            b.each(name, x, y)
        if name in ("isclose", "allclose"):
            b.each(name, T((3,), value=[1.0, NAN, 2.0]), T((3,), value=[1.0, NAN, 2.5]), equal_nan=True)
            b.each(name, T((3,), value=[1.0, 2.0, 3.0]), T((3,), value=[1.1, 2.0, 3.3]), rtol=0.2, atol=0.0)
    for p in (1, 3.0, INF, 0):
        b.each("dist", T((2, 3)), T((2, 3)), p)
    for p in (2.0, 1.0, 0.0, INF, 3.0):
        b.each("cdist", T((2, 4, 3)), T((5, 3)), p)
    b.each("cdist", T((4, 3)), T((4, 2)))


# --- reductions ---------------------------------------------------------------------------------------------

RED_INPUTS = (
    T((2, 3, 4)),
    T((2, 3, 4), "f64"),
    T((2, 3, 4), "i64"),
    T((2, 3, 4), "b"),
    T(()),
    T((5,)),
    T((2, 0, 3)),
    T((3, 4), layout="T"),
    T((4, 5), domain="edge"),
)
DIM_FORMS = ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": (0, 2)}, {"dim": 3}, {"dim": 0})
REDUCTIONS = {
    "sum": DIM_FORMS + ({"dtype": D("float64")}, {"dim": 1, "dtype": D("int64")}, {"dim": []}),
    "mean": DIM_FORMS + ({"dtype": D("float64")},),
    "prod": ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": 3}, {"dtype": D("float64")}),
    "std": DIM_FORMS + ({"correction": 0}, {"unbiased": False}, {"dim": 1, "correction": 2}),
    "var": DIM_FORMS + ({"correction": 0}, {"unbiased": False}, {"dim": 1, "correction": 2}),
    "var_mean": DIM_FORMS + ({"correction": 0}, {"unbiased": False}, {"dim": 1, "correction": 2}),
    "std_mean": DIM_FORMS + ({"correction": 0}, {"unbiased": False}, {"dim": 1, "correction": 2}),
    "nansum": DIM_FORMS + ({"dtype": D("float64")}, {"dim": 1, "dtype": D("int64")}),
    "nanmean": DIM_FORMS + ({"dtype": D("float64")},),
    "amax": DIM_FORMS[1:] + ({"dim": ()},),
    "amin": DIM_FORMS[1:] + ({"dim": ()},),
    "max": ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": 3}, {"dim": 0}),
    "min": ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": 3}, {"dim": 0}),
    "argmax": ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": 3}),
    "argmin": ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": 3}),
    "count_nonzero": ({}, {"dim": 1}, {"dim": (0, 2)}, {"dim": [-1]}, {"dim": 3}, {"dim": (0, 0)}),
    "all": ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": 3}),
    "any": ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": 3}),
    "logsumexp": ({"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": (0, 2)}, {"dim": 3}, {}),
    "norm": (
        {},
        {"p": 1},
        {"p": INF},
        {"p": "fro"},
        {"dim": 1},
        {"p": 2, "dim": -1, "keepdim": True},
        {"p": 0},
        {"p": 3.0, "dim": (0, 2)},
        {"dtype": D("float64")},
    ),
    "cumsum": ({"dim": 0}, {"dim": -1}, {"dim": 3}, {"dim": 1, "dtype": D("float64")}, {}),
    "cumprod": ({"dim": 0}, {"dim": -1}, {"dim": 3}, {"dim": 1, "dtype": D("float64")}),
}


def reductions(b: Builder) -> None:
    for name, forms in REDUCTIONS.items():
        for x in RED_INPUTS:
            for kwargs in forms:
                b.each(name, x, **kwargs)
                if name == "logsumexp":
                    b.add("F.logsumexp", caller("F.logsumexp"), x, **kwargs)
    for name in ("max", "min"):  # the binary form
        for x, y in [(T((2, 3)), T((2, 3))), (T((2, 3)), T((3,))), (T((2, 3)), T((2, 3), "f64"))]:
            b.each(name, x, y)
    for x in (T((4, 5), value=np.tile([1.0, 2.0, 2.0, 0.5, 2.0], 4).tolist()), T((5,), "i64", value=[3, 1, 3, 0, 3])):
        for name in ("max", "min", "amax", "amin", "argmax", "argmin"):  # ties
            b.each(name, x, **({"dim": -1} if name not in ("max", "min") else {}))
        b.each("max", x, dim=-1)


def sorting(b: Builder) -> None:
    inputs = (
        T((5,)),
        T((3, 4)),
        T((2, 3, 4)),
        T((6,), "i64", domain="idx", lo=0, hi=3),
        T((2, 3), "b"),
        T(()),
        T((0, 3)),
        T((4, 5), domain="edge"),
        T((3, 4), "f64", layout="T"),
    )
    for x in inputs:
        for kwargs in ({}, {"dim": 0}, {"descending": True}, {"stable": True}, {"dim": 2}):
            b.each("sort", x, **kwargs)
            b.each("argsort", x, **kwargs)
        for args, kwargs in (
            ((2,), {}),
            ((2,), {"dim": 0}),
            ((1,), {"largest": False}),
            ((3,), {"sorted": True}),
            ((9,), {}),
            ((0,), {}),
        ):
            b.each("topk", x, *args, **kwargs)


def softmaxes(b: Builder) -> None:
    for name in ("softmax", "log_softmax"):
        for x in (
            T((2, 3)),
            T((2, 3, 4)),
            T((5,)),
            T(()),
            T((2, 3), "f64"),
            T((2, 3), "i64"),
            T((0, 3)),
            T((3, 4), domain="edge"),
            T((3, 4), layout="T"),
            T((3,), value=[-INF, -INF, 0.0]),
        ):
            for args, kwargs in (
                ((), {"dim": -1}),
                ((), {"dim": 0}),
                ((1,), {}),
                ((), {"dim": 1, "dtype": D("float64")}),
                ((), {"dim": 5}),
            ):
                b.each(name, x, *args, namespaces=("torch", "Tensor", "F"), **kwargs)
        b.add(f"F.{name}", caller(f"F.{name}"), T((2, 3)))  # implicit dim (deprecated)


# --- shapes and views ---------------------------------------------------------------------------------------

SHAPE_FORMS = {
    "reshape": [((6, 4),), ((-1,),), ((2, -1, 2),), ((5, 5),), ((-1, -1),)],
    "view": [((6, 4),), ((-1,),), (6, 4), ((5, 5),), (D("int32"),)],
    "flatten": [(), (1,), (0, 1), (-2, -1), (2, 1)],
    "squeeze": [(), (0,), (1,), ((0, 1),), (5,)],
    "unsqueeze": [(0,), (-1,), (3,), (5,)],
    "permute": [((2, 0, 1),), (2, 0, 1), ((0, 1),), ((0, 0, 1),)],
    "transpose": [(0, 1), (-1, 0), (0, 3)],
    "swapaxes": [(0, 2)],
    "swapdims": [(1, 2)],
    "movedim": [(0, 2), ((0, 1), (2, 0)), (0, 5)],
    "moveaxis": [(0, 2), ((0, 1), (2, 0)), (0, 5)],
    "fliplr": [()],
    "flipud": [()],
    "trace": [()],
    "t": [()],
    "expand": [((2, 3, 4),), (2, 3, 4), ((-1, 3, 4),), ((3, 2, 3, 4),), ((2, 5, 4),)],
    "repeat": [((2, 1, 1),), (1, 2, 1, 2), ((2,),)],
    "tile": [((2,),), ((2, 1, 1, 2),), (2, 1)],
    "flip": [((0,),), ((0, 2),), (1,), ((),)],
    "roll": [(1,), (2, 1), ((1, -1), (0, 2)), (-5, -1)],
    "narrow": [(1, 1, 2), (-1, 0, 3), (0, 1, 5)],
    "select": [(1, 2), (-1, 0), (0, 5)],
    "chunk": [(2,), (2, 1), (4, -1), (0,)],
    "split": [(1,), (2, 1), ([1, 2], 1), ([1, 1], 1)],
    "unbind": [(), (1,), (-1,)],
    "tril": [(), (1,), (-1,)],
    "triu": [(), (1,), (-2,)],
    "diag": [(), (1,)],
    "diagonal": [(), (1,), (-1, 1, 0), (0, 0, 0), (0, -1, -2), (5,)],
    "sum_to_size": [((1, 3, 1),), ((3, 4),), ((4, 4),)],
    "contiguous": [()],
    "clone": [()],
    "detach": [()],
    "expand_as": [(T((2, 3, 4), grad=False),), (T((3, 2, 3, 4), grad=False),), (T((2, 5, 4), grad=False),)],
}
SHAPE_INPUTS = (
    T((2, 3, 4)),
    T((2, 3, 4), "i64"),
    T((2, 1, 4), "b"),
    T((2, 3, 4), layout="T"),
    T((2, 3, 4), layout="s"),
    T((1, 3, 4)),
    T(()),
    T((3, 4)),
    T((4,)),
    T((0, 3, 4)),
)


def shapes(b: Builder) -> None:
    for name, forms in SHAPE_FORMS.items():
        for x in SHAPE_INPUTS:
            for args in forms:
                b.each(name, x, *args)
    for name in ("T", "mT", "shape", "ndim"):
        for x in (T((2, 3)), T((2, 3, 4)), T((4,)), T(()), T((3, 4), "i64", layout="T")):
            b.add(f"Tensor.{name}", functools.partial(call_attribute, name), x)
    for name in ("cat", "concat", "concatenate", "stack"):
        for tensors, kwargs in [
            ([T((2, 3)), T((2, 3))], {}),
            ([T((2, 3)), T((1, 3))], {}),
            ([T((2, 3)), T((2, 4))], {"dim": 1}),
            ([T((2, 3)), T((2, 3))], {"dim": -1}),
            ([T((2, 3)), T((2, 3), "f64")], {}),
            ([T((2, 3), "i64"), T((2, 3))], {}),
            ([T((2, 3)), T((0,))], {}),
            ([T((2, 3))], {}),
            ([], {}),
            ([T((2, 3)), T((3,))], {}),
            ([T(()), T(())], {}),
            ([T((3, 2), layout="T"), T((2, 3))], {"dim": 0}),
            ([T((2, 3)), T((2, 3))], {"dim": 3}),
        ]:
            b.each(name, tensors, namespaces=("torch",), **kwargs)
        b.each(name, (T((2, 3)), T((2, 3), "b")), namespaces=("torch",), dim=1)
    for name in ("hstack", "vstack"):
        for tensors in (
            [T((2, 3)), T((2, 3))],
            [T((2, 3)), T((2, 4))],
            [T((2, 3)), T((1, 3))],
            [T((3,)), T((2,))],
            [T((3,)), T((3,), "i64")],
            [T(()), T(())],
            [T(()), T((2,))],
            [T((2, 3, 4)), T((2, 3, 4), "f64")],
            [T((3, 2), layout="T"), T((3, 2))],
            [T((2, 3))],
            [],
        ):
            b.each(name, tensors, namespaces=("torch",))
    for x in (T((3,)), T((3,), "i64"), T((2, 3, 4)), T(())):
        b.add("Tensor.detach_", lambda L, x: x.detach().detach_(), x)
        b.add("Tensor.requires_grad_", lambda L, x: x.detach().requires_grad_(), x)
        b.add("Tensor.requires_grad_", lambda L, x: x.detach().requires_grad_(False), x)


# --- indexing -----------------------------------------------------------------------------------------------


def index_forms() -> list:
    i = functools.partial(T, dtype="i64", domain="idx", grad=False)
    return [
        0,
        -1,
        4,
        3,
        slice(1, 3),
        slice(None, None, 2),
        slice(1, None, 3),
        slice(None, None, -1),
        slice(5, 1),
        None,
        Ellipsis,
        (Ellipsis, 0),
        (0, slice(1, 4, 2)),
        (None, 0, Ellipsis),
        (slice(None), None, 1),
        (0, 1, 2),
        (0, 1, 2, 0),
        T((4,), "b", grad=False),
        T((4, 5), "b", grad=False),
        T((3,), "b", grad=False),
        T((4, 5, 6), "b", grad=False),
        i((3,), lo=0, hi=4),
        i((2, 2), lo=0, hi=4),
        i((3,), lo=-4, hi=4),
        i((3,), lo=4, hi=9),
        i((), lo=0, hi=4),
        [0, 2],
        [[0, 1], [1, 2]],
        [True, False, True, True],
        range(0, 4, 2),
        (0, [1, 2]),
        (slice(None), i((2,), lo=0, hi=5)),
        (i((2,), lo=0, hi=4), slice(None), i((2,), lo=0, hi=6)),
        (i((2,), lo=0, hi=4), i((2,), lo=0, hi=5)),
        (i((2, 1), lo=0, hi=4), i((3,), lo=0, hi=5)),
        (Ellipsis, i((2,), lo=0, hi=6)),
        (0, slice(None), [0, 1]),
        True,
        False,
        T((), "b", grad=False),
        1.5,
        (i((2,), lo=0, hi=4), None),
        (slice(None), T((5,), "b", grad=False)),
        (T((4,), "b", grad=False), 0),
        (i((2,), lo=0, hi=4), i((3,), lo=0, hi=5)),
        T((3,), "f32", grad=False),
        (),
        "a",
    ]


def indexing(b: Builder) -> None:
    forms = index_forms()
    for x in (T((4, 5, 6)), T((4, 5, 6), "i64"), T((6, 5, 4), layout="T"), T((4, 5, 6), "f64", layout="s")):
        for index in forms:
            b.add("Tensor.__getitem__", lambda L, x, index: x[index], x, index)
    for x in (T(()), T((5,)), T((0, 3))):
        for index in ((), None, Ellipsis, 0, slice(None, None, 3), T((), "b", grad=False), [0], (0, 0)):
            b.add("Tensor.__getitem__", lambda L, x, index: x[index], x, index)
    values = (1.5, T(()), T((6,)), T((5, 6), "f64", grad=False), T((6,), "i64"), T((2, 6)), -1)
    for x in (T((4, 5, 6)), T((4, 5, 6), "i64"), T((4, 5, 6), grad=False)):
        for index in (
            0,
            slice(1, 3),
            (slice(None), 1),
            T((4,), "b", grad=False),
            [0, 2],
            (0, [1, 2]),
            Ellipsis,
            (T((4, 5), "b", grad=False)),
            (slice(None, None, 2), None, 0),
        ):
            for value in values:
                b.add("Tensor.__setitem__", _setitem, x, index, value)
    b.add("Tensor.__setitem__", _setitem, T((3, 4), "f32", "e", grad=False), 0, 1.0)
    b.add("Tensor.__setitem__", _setitem, T((3, 4), "f32", "T", grad=False), (slice(None), 1), T((3,), grad=False))


def _setitem(L, x, index, value):
    y = x.clone() if x.requires_grad else x
    y[index] = value
    return y


def gather_scatter(b: Builder) -> None:
    i = functools.partial(T, dtype="i64", domain="idx", grad=False)
    x = T((3, 4))
    for args in [
        (1, i((3, 2), hi=4)),
        (0, i((2, 4), hi=3)),
        (-1, i((3, 4), hi=4)),
        (1, i((3, 2), hi=7)),
        (1, i((3, 2), hi=4, dtype="f32")),
        (1, i((2, 5), hi=4)),
        (2, i((3, 2), hi=4)),
        (0, i((0, 4))),
    ]:
        for inp in (x, T((3, 4), "f64"), T((3, 4), "i64"), T((4, 3), layout="T")):
            b.each("gather", inp, *args)
            b.each("take_along_dim", inp, args[1], dim=args[0])
            for name in ("scatter", "scatter_add"):
                b.each(name, inp, args[0], args[1], T(tuple(args[1].shape)))
            b.each("scatter", inp, args[0], args[1], 2.5)
            b.each("scatter", inp, args[0], args[1], T((3, 4)), reduce="add")
            for reduce in ("sum", "prod", "mean", "amax", "amin"):
                for include in (True, False):
                    b.each(
                        "scatter_reduce", inp, args[0], args[1], T(tuple(args[1].shape)), reduce, include_self=include
                    )
            for name in ("scatter_", "scatter_add_"):
                b.add(
                    f"Tensor.{name}",
                    functools.partial(call_inplace, name),
                    inp,
                    args[0],
                    args[1],
                    T(tuple(args[1].shape)),
                )
            b.add(
                "Tensor.scatter_reduce_",
                functools.partial(call_inplace, "scatter_reduce_"),
                inp,
                args[0],
                args[1],
                T(tuple(args[1].shape)),
                "amax",
            )
    b.each("take_along_dim", x, i((3, 4), hi=12))
    b.each("scatter_reduce", x, 1, i((3, 2), hi=4), T((3, 2)), "bad")
    for inp in (x, T((3, 4), "i64"), T((2, 3, 4), layout="s")):
        for dim, index in (
            (0, i((2,), hi=3)),
            (1, i((5,), hi=4)),
            (-1, i((), hi=4)),
            (0, i((2,), hi=9)),
            (0, i((2, 2), hi=3)),
            (1, [0, 1]),
        ):
            b.each("index_select", inp, dim, index)
        for mask, value in (
            (T((3, 4), "b", grad=False), 0.5),
            (T((4,), "b", grad=False), -INF),
            (T((3, 4), "b", grad=False), T(())),
            (T((3, 4), "b", grad=False), T((), "f64")),
            (T((3, 4), "i64", grad=False), 0.5),
            (T((2, 4), "b", grad=False), 1.0),
            (T((3, 4), "b", grad=False), T((4,))),
            (T((3, 4), "b", grad=False), 2),
        ):
            b.each("masked_fill", inp, mask, value)
            b.add("Tensor.masked_fill_", functools.partial(call_inplace, "masked_fill_"), inp, mask, value)
        for mask in (
            T((3, 4), "b", grad=False),
            T((4,), "b", grad=False),
            T((3, 4), "i64", grad=False),
            T((5,), "b", grad=False),
        ):
            b.each("masked_select", inp, mask)
        for kwargs in ({}, {"as_tuple": True}):
            b.each("nonzero", inp, **kwargs)
    for z in (T(()), T((0, 3)), T((3,), "b"), T((4, 5), domain="edge")):
        b.each("nonzero", z)
    for z in (T(()), T((0, 3)), T((3,), "b"), T((4, 5), domain="edge"), T((2, 3, 4), "i64"), T((3, 4), layout="T")):
        b.each("argwhere", z)


# --- products -----------------------------------------------------------------------------------------------


def products(b: Builder) -> None:
    for x, y in [
        (T((2, 3)), T((3, 4))),
        (T((3,)), T((3,))),
        (T((3,)), T((3, 4))),
        (T((2, 3)), T((3,))),
        (T((5, 2, 3)), T((3, 4))),
        (T((5, 2, 3)), T((5, 3, 4))),
        (T((1, 2, 3)), T((5, 3, 4))),
        (T((2, 3)), T((4, 2))),
        (T(()), T((3,))),
        (T((2, 3)), T((3, 4), "f64")),
        (T((2, 3), "i64"), T((3, 4), "i64")),
        (T((3, 2), layout="T"), T((4, 3), layout="T")),
        (T((2, 0)), T((0, 4))),
        (T((4, 5), domain="edge"), T((5, 2))),
        (T((2, 3), "b"), T((3, 4), "b")),
    ]:
        for name in ("matmul", "mm", "bmm", "dot", "outer", "mv"):
            b.each(name, x, y)
    for eq, ops in [
        ("ij,jk->ik", (T((2, 3)), T((3, 4)))),
        ("bij,bjk->bik", (T((2, 2, 3)), T((2, 3, 4)))),
        ("ii->i", (T((3, 3)),)),
        ("ii", (T((3, 3)),)),
        ("i,j->ij", (T((2,)), T((3,)))),
        ("...ij->...ji", (T((2, 3, 4)),)),
        ("ij->", (T((2, 3)),)),
        ("ij,ij->ij", (T((2, 3)), T((2, 3)))),
        ("ij,jk", (T((2, 3)), T((4, 5)))),
        ("ij,jk->ik", (T((2, 3)), T((3, 4), "f64"))),
        ("i j , j k -> i k", (T((2, 3)), T((3, 4)))),
        ("ab,bc,cd->ad", (T((2, 3)), T((3, 4)), T((4, 2)))),
    ]:
        b.add("torch.einsum", caller("torch.einsum"), eq, *ops)
        if len(ops) == 2:
            b.add("torch.einsum", caller("torch.einsum"), eq, list(ops))


# --- creation and conversion --------------------------------------------------------------------------------


def creation(b: Builder) -> None:
    for args, kwargs in [
        ((5,), {}),
        ((1, 4), {}),
        ((0, 1, 0.25), {}),
        ((5,), {"dtype": D("float64")}),
        ((0, -3, -1), {}),
        ((1.5,), {}),
        ((0, 5, 0), {}),
        ((3, 0), {}),
        ((0.0, 1.0, 0.3), {}),
        ((5,), {"requires_grad": True}),
        ((5,), {"dtype": D("float32"), "requires_grad": True}),
    ]:
        b.add("torch.arange", caller("torch.arange"), *args, **kwargs)
    for args, kwargs in [
        ((0, 1, 5), {}),
        ((0, 1, 1), {}),
        ((0, 1, 0), {}),
        ((1, -1, 4), {"dtype": D("float64")}),
        ((0, 10, 4), {"dtype": D("int64")}),
        ((0, 1, -1), {}),
    ]:
        b.add("torch.linspace", caller("torch.linspace"), *args, **kwargs)
    shapes = [((2, 3),), (2, 3), ((),), ((0,),), (4,), ((2, -1),)]
    for name in ("zeros", "ones", "empty"):
        for args in shapes:
            for kwargs in ({}, {"dtype": D("int64")}, {"dtype": D("bool")}, {"requires_grad": True}):
                b.add(f"torch.{name}", caller(f"torch.{name}"), *args, values=name != "empty", **kwargs)
    for args, kwargs in [
        (((2,), 1), {}),
        (((2,), True), {}),
        (((2,), 1.5), {}),
        (((2, 3), 2), {"dtype": D("float64")}),
        (((), 7), {}),
        (((2,), INF), {}),
        (((2,), 1.5), {"dtype": D("int64")}),
    ]:
        b.add("torch.full", caller("torch.full"), *args, **kwargs)
    for args, kwargs in [((3,), {}), ((2, 3), {}), ((3,), {"dtype": D("int64")}), ((0,), {}), ((-1,), {})]:
        b.add("torch.eye", caller("torch.eye"), *args, **kwargs)
    for x in (T((2, 3)), T((2, 3), "i64"), T((), "b"), T((3, 4), layout="T")):
        for name, args in (
            ("zeros_like", ()),
            ("ones_like", ()),
            ("full_like", (2.5,)),
            ("empty_like", ()),
            ("rand_like", ()),
            ("randn_like", ()),
        ):
            random = name in ("empty_like", "rand_like", "randn_like")
            for kwargs in ({}, {"dtype": D("float64")}, {"requires_grad": True}):
                b.add(f"torch.{name}", caller(f"torch.{name}"), x, *args, values=not random, **kwargs)
        for name, args in (
            ("new_zeros", ((2, 3),)),
            ("new_ones", ((2,),)),
            ("new_full", ((2,), 3)),
            ("new_empty", ((2, 2),)),
            ("new_tensor", ([1, 2],)),
            ("new_tensor", ([1.5],)),
            ("new_zeros", (2, 3)),
            ("new_ones", ((2,),)),
        ):
            for kwargs in ({}, {"dtype": D("int64")}, {"requires_grad": True}):
                b.add(f"Tensor.{name}", caller(f"Tensor.{name}"), x, *args, values=name != "new_empty", **kwargs)
    for data, kwargs in [
        ([1, 2], {}),
        ([1.0, 2], {}),
        (True, {}),
        ([[1, 2], [3, 4]], {}),
        ([], {}),
        ([[1], [2, 3]], {}),
        (3.5, {}),
        ([True, 1], {}),
        ([1, 2], {"dtype": D("float64")}),
        ([1, 2], {"requires_grad": True}),
        ([1.0], {"requires_grad": True}),
        ([[]], {}),
        ([INF, NAN, -0.0], {}),
        (2**40, {}),
        ([1.5, 2.5], {"dtype": D("int64")}),
        ("a", {}),
        ([1, "a"], {}),
    ]:
        for name in ("tensor", "as_tensor"):
            if name == "as_tensor" and "requires_grad" in kwargs:
                continue
            b.add(f"torch.{name}", caller(f"torch.{name}"), data, **kwargs)
    for x in (T((2, 3)), T((2, 3), "i64"), T((2, 3), grad=False)):
        b.add("torch.tensor", caller("torch.tensor"), x)
        b.add("torch.as_tensor", caller("torch.as_tensor"), x, dtype=D("float64"))
        b.add("torch.is_tensor", caller("torch.is_tensor"), x)
    for array in ("f32", "f64", "i64", "b", "i32", "list", "u16"):
        b.add("torch.from_numpy", _from_numpy, array)
    b.add("torch.is_tensor", caller("torch.is_tensor"), [1.0])
    for args, kwargs in [
        ((2, 3), {}),
        (((2, 3),), {"dtype": D("float64")}),
        ((0,), {}),
        ((2,), {"requires_grad": True}),
    ]:
        b.add("torch.rand", caller("torch.rand"), *args, values=False, **kwargs)
        b.add("torch.randn", caller("torch.randn"), *args, values=False, **kwargs)
    for args, kwargs in [
        ((0, 5, (3,)), {}),
        ((5, (3,)), {}),
        ((0, 5, (2, 2)), {"dtype": D("float32")}),
        ((5, 0, (3,)), {}),
    ]:
        b.add("torch.randint", caller("torch.randint"), *args, values=False, **kwargs)
    for args, kwargs in [((5,), {}), ((0,), {}), ((4,), {"dtype": D("float32")})]:
        b.add("torch.randperm", caller("torch.randperm"), *args, values=False, **kwargs)
    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d"):
        shape = {"dropout": (4, 5), "dropout1d": (2, 3, 4), "dropout2d": (2, 3, 4, 4), "dropout3d": (2, 3, 2, 2, 2)}[
            name
        ]
        for kwargs in (
            {"p": 0.0},
            {"p": 1.0},
            {"p": 0.5, "training": False},
            {"p": 0.5},
            {"p": 1.5},
            {"p": 0.0, "inplace": True},
        ):
            b.add(
                f"F.{name}",
                caller(f"F.{name}"),
                T(shape, grad="inplace" not in kwargs),
                values=kwargs.get("p") in (0.0, 1.0, 1.5) or "training" in kwargs,
                **kwargs,
            )
        b.add(f"F.{name}", caller(f"F.{name}"), T((3,)), p=0.0)


def _from_numpy(L, kind):
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f64": np.linspace(0, 1, 4),
        "i64": np.arange(4),
        "b": np.array([True, False]),
        "i32": np.arange(3, dtype=np.int32),
        "list": [1.0, 2.0],
        "u16": np.arange(3, dtype=np.uint16),
    }
    return L.from_numpy(arrays[kind])


CONVERSIONS = ("long", "int", "float", "double", "half", "bool", "short")


def conversions(b: Builder) -> None:
    inputs = (
        T((2, 3)),
        T((2, 3), "f64"),
        T((2, 3), "i64"),
        T((2, 3), "b"),
        T(()),
        T((4, 5), domain="edge"),
        T((3, 4), layout="T"),
    )
    for x in inputs:
        for name in CONVERSIONS:
            b.add(f"Tensor.{name}", caller(f"Tensor.{name}"), x)
        for dtype in ("float64", "int64", "bool", "float32"):
            b.add("Tensor.to", caller("Tensor.to"), x, D(dtype))
            b.add("Tensor.to", caller("Tensor.to"), x, dtype=D(dtype))
            b.add("Tensor.type", caller("Tensor.type"), x, D(dtype))
        b.add("Tensor.to", caller("Tensor.to"), x, "cpu")
        b.add("Tensor.to", caller("Tensor.to"), x, T((), "f64"))
        b.add("Tensor.to", caller("Tensor.to"), x, D("float32"), copy=True)
        b.add("Tensor.type_as", caller("Tensor.type_as"), x, T((1,), "i64"))
        b.add("Tensor.type_as", caller("Tensor.type_as"), x, T((1,), "f64"))
        for name in (
            "numpy",
            "tolist",
            "item",
            "element_size",
            "dim",
            "ndimension",
            "nelement",
            "numel",
            "size",
            "is_floating_point",
            "is_contiguous",
        ):
            b.add(f"Tensor.{name}", caller(f"Tensor.{name}"), x)
        b.add("Tensor.numpy", lambda L, x: x.detach().numpy(), x)
        for dim in (1, -1, 5):
            b.add("Tensor.size", caller("Tensor.size"), x, dim)
        for name in ("numel", "is_floating_point"):
            b.add(f"torch.{name}", caller(f"torch.{name}"), x)
        b.add("Tensor.copy_", functools.partial(call_inplace, "copy_"), x, T((2, 3), "f64"))
        b.add("Tensor.copy_", functools.partial(call_inplace, "copy_"), x, T((3,), "i64"))
        b.add("Tensor.fill_", functools.partial(call_inplace, "fill_"), x, 1.5)
        b.add("Tensor.fill_", functools.partial(call_inplace, "fill_"), x, T(()))
        b.add("Tensor.fill_", functools.partial(call_inplace, "fill_"), x, T((2,)))
        b.add("Tensor.zero_", functools.partial(call_inplace, "zero_"), x)
    for x in (T((1,)), T((1, 1), "i64"), T((), "b")):
        b.add("Tensor.item", caller("Tensor.item"), x)
    b.add("Tensor.copy_", functools.partial(call_inplace, "copy_"), T((3, 4), "f32", "e", grad=False), T((3, 4)))


# --- nn.functional ------------------------------------------------------------------------------------------


def losses(b: Builder) -> None:
    reductions = ("mean", "sum", "none")
    for name, extra in (
        ("mse_loss", {}),
        ("l1_loss", {}),
        ("smooth_l1_loss", {"beta": 0.5}),
        ("huber_loss", {"delta": 2.0}),
    ):
        for x, y in [
            (T((4, 3)), T((4, 3))),
            (T((4, 3)), T((3,))),
            (T(()), T(())),
            (T((0, 3)), T((0, 3))),
            (T((4, 3)), T((4, 3), "f64")),
            (T((4, 3)), T((4, 3), grad=False)),
            (T((4, 3), "i64"), T((4, 3), "i64")),
            (T((4, 5), domain="edge"), T((4, 5))),
            (T((4, 3)), T((5, 3))),
        ]:
            for reduction in reductions + ("bad",):
                b.add(f"F.{name}", caller(f"F.{name}"), x, y, reduction=reduction)
        for k, v in extra.items():
            b.add(f"F.{name}", caller(f"F.{name}"), T((4, 3)), T((4, 3)), **{k: v})
            b.add(f"F.{name}", caller(f"F.{name}"), T((4, 3)), T((4, 3)), **{k: 0.0})
    for x, y in [
        (T((4, 3), domain="prob"), T((4, 3), domain="prob", grad=False)),
        (T((4,), domain="prob"), T((4,), "b")),
        (T((4,), value=[0.0, 1.0, 0.5, 1.0]), T((4,), value=[0.0, 1.0, 1.0, 0.0], grad=False)),
        (T((4, 3), domain="prob"), T((4, 3), domain="prob")),
        (T((4,)), T((4,), domain="prob", grad=False)),
        (T((4, 3), domain="prob"), T((3,), domain="prob", grad=False)),
    ]:
        for reduction in reductions:
            b.add("F.binary_cross_entropy", caller("F.binary_cross_entropy"), x, y, reduction=reduction)
            b.add(
                "F.binary_cross_entropy_with_logits",
                caller("F.binary_cross_entropy_with_logits"),
                T(tuple(x.shape)),
                y,
                reduction=reduction,
            )
        b.add(
            "F.binary_cross_entropy", caller("F.binary_cross_entropy"), x, y, weight=T(tuple(x.shape)[-1:], grad=False)
        )
        b.add(
            "F.binary_cross_entropy_with_logits",
            caller("F.binary_cross_entropy_with_logits"),
            T(tuple(x.shape)),
            y,
            weight=T(tuple(x.shape)[-1:]),
            pos_weight=T(tuple(x.shape)[-1:], domain="pos"),
        )
    b.add(
        "F.binary_cross_entropy_with_logits",
        caller("F.binary_cross_entropy_with_logits"),
        T((4,), domain="edge"),
        T((4,), domain="prob"),
    )
    target = functools.partial(T, dtype="i64", domain="idx", grad=False)
    for name in ("cross_entropy", "nll_loss"):
        for x, y in [
            (T((4, 3)), target((4,), hi=3)),
            (T((3,)), target((), hi=3)),
            (T((4, 3, 2)), target((4, 2), hi=3)),
            (T((2, 3, 2, 2)), target((2, 2, 2), hi=3)),
            (T((4, 3), "f64"), target((4,), hi=3)),
            (T((4, 3)), target((4,), hi=5)),
            (T((4, 3)), target((4,), lo=-1, hi=3)),
            (T((4, 3)), target((5,), hi=3)),
            (T((4, 3)), T((4, 3), domain="prob", grad=False)),
            (T((0, 3)), target((0,), hi=3)),
            (T((4, 3)), target((4,), hi=3, dtype="f32")),
            (T((4, 3), domain="edge"), target((4,), hi=3)),
        ]:
            for kwargs in (
                {},
                {"reduction": "sum"},
                {"reduction": "none"},
                {"ignore_index": 1},
                {"ignore_index": -1, "reduction": "sum"},
                {"weight": T((3,), domain="pos", grad=False)},
                {"weight": T((3,), domain="pos", grad=False), "ignore_index": 0},
                {"weight": T((4,), domain="pos", grad=False)},
                {"reduction": "bad"},
            ):
                b.add(f"F.{name}", caller(f"F.{name}"), x, y, **kwargs)
        b.add(f"F.{name}", caller(f"F.{name}"), T((4, 3)), T((4,), "i64", value=[1, 1, 1, 1]), ignore_index=1)
    for x, y in [
        (T((4, 3)), T((4, 3), domain="prob")),
        (T((4, 3)), T((3,), domain="prob", grad=False)),
        (T(()), T((), domain="prob")),
        (T((0, 3)), T((0, 3))),
        (T((4, 3)), T((4, 3), "f64", domain="prob", grad=False)),
        (T((4, 3), domain="edge"), T((4, 3), domain="prob")),
        (T((4, 3)), T((4, 3), value=[[0.0, 0.5, 0.5]] * 4)),
        (T((4, 3), "i64"), T((4, 3))),
        (T((4, 3)), T((5, 3))),
    ]:
        for reduction in ("batchmean", "sum", "none", "mean", "bad"):
            b.add("F.kl_div", caller("F.kl_div"), x, y, reduction=reduction)
        b.add("F.kl_div", caller("F.kl_div"), x, y, reduction="batchmean", log_target=True)
    for smoothing in (0.1, 0.0, 1.5):
        b.add("F.cross_entropy", caller("F.cross_entropy"), T((4, 3)), target((4,), hi=3), label_smoothing=smoothing)
        b.add(
            "F.cross_entropy",
            caller("F.cross_entropy"),
            T((4, 3)),
            T((4, 3), domain="prob", grad=False),
            label_smoothing=smoothing,
        )


def activations(b: Builder) -> None:
    idx = functools.partial(T, dtype="i64", domain="idx", grad=False)
    for x, w in [
        (T((2, 3, 4)), T((3,))),
        (T((2, 3, 4)), T((1,))),
        (T((2, 3)), T(())),
        (T((3,)), T((1,))),
        (T(()), T((1,))),
        (T((2, 3, 4), "f32", "T"), T((3,))),
        (T((2, 3, 4), "f32", "e"), T((3,))),
        (T((4, 3), domain="edge"), T((3,))),
        (T((2, 0, 3)), T((1,))),
        (T((2, 3, 4)), T((4,))),
        (T((2, 3)), T((1, 3))),
        (T((2, 3, 4)), T((3,), "f64")),
        (T((2, 3, 4), "i64"), T((3,), "i64")),
    ]:
        b.add("F.prelu", caller("F.prelu"), x, w)
    for x, kwargs in [
        (T((3, 4)), {}),
        (T((3, 4)), {"p": 1}),
        (T((3, 4)), {"p": float("inf"), "dim": 0}),
        (T((2, 3, 4)), {"dim": (0, 2)}),
        (T((3, 4), domain="edge"), {}),
        (T((3, 4), "f64", domain="edge"), {"eps": 1e-3}),
        (T((5,)), {"dim": 0}),
        (T((3, 4), "f32", "T"), {}),
        (T((2, 0, 3)), {}),
        (T((5,)), {}),
        (T((3, 4), "i64"), {}),
    ]:
        b.add("F.normalize", caller("F.normalize"), x, **kwargs)
    for x, y, kwargs in [
        (T((3, 4)), T((3, 4)), {}),
        (T((3, 4)), T((4,)), {"dim": -1}),
        (T((2, 1, 4)), T((3, 4)), {"dim": -1}),
        (T((3, 4), domain="edge"), T((3, 4), domain="edge"), {}),
        (T((3, 4), "f64"), T((3, 4), "f64", value=[[0.0] * 4] * 3), {}),
        (T((3, 4)), T((3, 4), "f64"), {"eps": 0.5}),
        (T((3, 4), "i64"), T((3, 4)), {}),
        (T(()), T(()), {"dim": 0}),
        (T((3, 4), "f32", "T"), T((3, 4), "f32", "e"), {}),
        (T((3, 0)), T((3, 0)), {}),
        (T((3, 4), "i64"), T((3, 4), "i64"), {}),
        (T((3, 4)), T((5,)), {"dim": -1}),
        (T((3, 4)), T((3, 4)), {"dim": 2}),
    ]:
        b.add("F.cosine_similarity", caller("F.cosine_similarity"), x, y, **kwargs)
    for args, kwargs in [
        ((idx((4,), hi=3),), {}),
        ((idx((4,), hi=3), 5), {}),
        ((idx((2, 3), hi=4),), {}),
        ((idx((4,), hi=3), 2), {}),
        ((idx((4,), lo=-1, hi=3),), {}),
        ((T((3,)),), {}),
        ((idx((0,), hi=1),), {"num_classes": 3}),
        ((idx((), hi=3), 3), {}),
    ]:
        b.add("F.one_hot", caller("F.one_hot"), *args, **kwargs)
    weight = T((5, 3))
    for index, kwargs in [
        (idx((4,), hi=5), {}),
        (idx((2, 3), hi=5), {}),
        (idx((4,), hi=5), {"padding_idx": 1}),
        (idx((4,), hi=5), {"padding_idx": -1}),
        (idx((4,), hi=7), {}),
        (T((4,)), {}),
        (idx((), hi=5), {}),
        (idx((4,), hi=5), {"padding_idx": 9}),
        (T((4,), value=[1, 1, 2, 1], dtype="i64", grad=False), {}),
    ]:
        b.add("F.embedding", caller("F.embedding"), index, weight, **kwargs)
    for x, w, bias in [
        (T((4, 3)), T((2, 3)), T((2,))),
        (T((3,)), T((2, 3)), None),
        (T((2, 4, 3)), T((2, 3)), T((2,))),
        (T((4, 3)), T((2, 4)), None),
        (T((4, 3)), T((2, 3), "f64"), None),
        (T((4, 3)), T((2, 3)), T(())),
        (T((4, 3), "i64"), T((2, 3), "i64"), None),
        (T((0, 3)), T((2, 3)), T((2,))),
    ]:
        b.add("F.linear", caller("F.linear"), x, w, bias)


def convolutions(b: Builder) -> None:
    x = T((2, 4, 6, 6))
    for w, kwargs in [
        (T((3, 4, 3, 3)), {}),
        (T((3, 4, 3, 3)), {"stride": 2}),
        (T((3, 4, 3, 3)), {"padding": 1}),
        (T((3, 4, 3, 3)), {"padding": "same"}),
        (T((3, 4, 2, 2)), {"padding": "same"}),
        (T((3, 4, 3, 3)), {"padding": "valid"}),
        (T((3, 4, 3, 3)), {"dilation": 2}),
        (T((4, 2, 3, 3)), {"groups": 2}),
        (T((3, 2, 3, 3)), {"groups": 2}),
        (T((3, 5, 3, 3)), {}),
        (T((3, 4, 3, 3)), {"bias": T((3,))}),
        (T((3, 4, 3, 3)), {"bias": T((2,))}),
        (T((3, 4, 3, 3)), {"stride": 2, "padding": "same"}),
        (T((3, 4, 7, 7)), {}),
        (T((3, 4, 3, 3), "f64"), {}),
        (T((3, 4, 3, 3)), {"stride": (1, 2), "padding": (0, 1)}),
    ]:
        b.add("F.conv2d", caller("F.conv2d"), x, w, **kwargs)
    b.add("F.conv2d", caller("F.conv2d"), T((4, 6, 6)), T((3, 4, 3, 3)))
    b.add("F.conv2d", caller("F.conv2d"), T((2, 4, 6, 6), layout="T"), T((3, 4, 3, 3)))
    b.add("F.conv2d", caller("F.conv2d"), T((2, 4, 6, 6), "i64"), T((3, 4, 3, 3), "i64"))
    for w, kwargs in [
        (T((4, 3, 3, 3)), {}),
        (T((4, 3, 3, 3)), {"stride": 2}),
        (T((4, 3, 3, 3)), {"padding": 1}),
        (T((4, 3, 3, 3)), {"stride": 2, "output_padding": 1}),
        (T((4, 2, 3, 3)), {"groups": 2}),
        (T((4, 3, 3, 3)), {"dilation": 2}),
        (T((4, 3, 3, 3)), {"bias": T((3,))}),
        (T((3, 3, 3, 3)), {}),
        (T((4, 3, 3, 3)), {"output_padding": 1}),
        (T((4, 3, 2, 2)), {"stride": (2, 1), "padding": (1, 0)}),
    ]:
        b.add("F.conv_transpose2d", caller("F.conv_transpose2d"), x, w, **kwargs)
    for kwargs in (
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2},
        {"kernel_size": 3, "padding": 1},
        {"kernel_size": 3, "stride": 2, "ceil_mode": True},
        {"kernel_size": 2, "dilation": 2},
        {"kernel_size": 3, "padding": 2},
        {"kernel_size": (2, 3), "stride": (1, 2)},
        {"kernel_size": 7},
    ):
        b.add("F.max_pool2d", caller("F.max_pool2d"), x, **kwargs)
        b.add("F.avg_pool2d", caller("F.avg_pool2d"), x, **{k: v for k, v in kwargs.items() if k != "dilation"})
    b.add("F.max_pool2d", caller("F.max_pool2d"), x, 2, return_indices=True)
    b.add("F.max_pool2d", caller("F.max_pool2d"), T((4, 6, 6)), 2)
    b.add("F.max_pool2d", caller("F.max_pool2d"), T((2, 4, 6, 6), domain="edge"), 2)
    b.add("F.max_pool2d", caller("F.max_pool2d"), T((2, 4, 6, 6), "i64"), 2)
    for kwargs in (
        {"count_include_pad": False, "padding": 1},
        {"divisor_override": 3},
        {"ceil_mode": True, "stride": 2},
    ):
        b.add("F.avg_pool2d", caller("F.avg_pool2d"), x, 3, **kwargs)
    for size in (1, 3, (2, 3), (None, 2), 4, (6, 6), 0):
        b.add("F.adaptive_avg_pool2d", caller("F.adaptive_avg_pool2d"), x, size)
    b.add("F.adaptive_avg_pool2d", caller("F.adaptive_avg_pool2d"), T((4, 5, 7)), 3)
    for pad, kwargs in [
        ((1, 1), {}),
        ((1, 2, 0, 1), {}),
        ((1, 1), {"value": 2.5}),
        ((1, 1), {"mode": "reflect"}),
        ((2, 1, 1, 2), {"mode": "replicate"}),
        ((1, 1, 1, 1), {"mode": "circular"}),
        ((-1, 1), {}),
        ((7, 7), {"mode": "reflect"}),
        ((1,), {}),
        ((0, 0, 0, 0, 1, 1), {}),
        ((1, 1), {"mode": "bad"}),
    ]:
        b.add("F.pad", caller("F.pad"), x, pad, **kwargs)
    b.add("F.pad", caller("F.pad"), T((3, 4), "i64"), (1, 1))
    b.add("F.pad", caller("F.pad"), T((2, 3, 4)), (1, 1), mode="reflect")
    for fn, kwargs in [
        ("interpolate", {"scale_factor": 2}),
        ("interpolate", {"size": (3, 5)}),
        ("interpolate", {"size": 9, "mode": "nearest"}),
        ("interpolate", {"scale_factor": 1.5, "mode": "bilinear"}),
        ("interpolate", {"size": (4, 8), "mode": "bilinear", "align_corners": True}),
        ("interpolate", {"scale_factor": 0.5, "mode": "bilinear", "align_corners": False}),
        ("interpolate", {"scale_factor": 2, "mode": "bicubic"}),
        ("interpolate", {"size": (2, 3), "mode": "bilinear", "antialias": True}),
        ("interpolate", {"scale_factor": 0.5, "mode": "bicubic", "antialias": True}),
        ("interpolate", {}),
        ("interpolate", {"size": 4, "scale_factor": 2}),
        ("interpolate", {"scale_factor": 2, "mode": "area"}),
        ("interpolate", {"size": (3, 3), "mode": "area"}),
        ("upsample", {"scale_factor": 2}),
        ("upsample", {"size": (4, 4), "mode": "bilinear"}),
        ("upsample_nearest", {"scale_factor": 2}),
        ("upsample_bilinear", {"size": (8, 8)}),
        ("upsample_bilinear", {"scale_factor": 2}),
    ]:
        b.add(f"F.{fn}", caller(f"F.{fn}"), x, **kwargs)
    b.add("F.interpolate", caller("F.interpolate"), T((2, 3, 5)), scale_factor=2)
    b.add("F.interpolate", caller("F.interpolate"), T((2, 3, 5)), scale_factor=2, mode="linear")
    for name, args, kwargs in [
        ("unfold", (x, 2), {}),
        ("unfold", (x, 3), {"stride": 2, "padding": 1}),
        ("unfold", (x, (2, 3)), {"dilation": 2}),
        ("unfold", (T((4, 6, 6)), 2), {}),
        ("unfold", (x, 9), {}),
        ("fold", (T((2, 16, 25)), (6, 6), 2), {}),
        ("fold", (T((2, 36, 9)), (6, 6), 3), {"stride": 2, "padding": 1}),
        ("fold", (T((16, 25)), (6, 6), 2), {}),
        ("fold", (T((2, 15, 25)), (6, 6), 2), {}),
    ]:
        b.add(f"F.{name}", caller(f"F.{name}"), *args, **kwargs)
    norms(b)


def _batch_norm(L, x, mean, var, *args, **kwargs):
    """The output and the running statistics (updated in place in training mode)."""
    mean = None if mean is None else mean.detach().clone()
    var = None if var is None else var.detach().clone()
    out = L.nn.functional.batch_norm(x, mean, var, *args, **kwargs)
    return out, mean, var


def norms(b: Builder) -> None:
    for x in (T((4, 3)), T((4, 3, 5)), T((2, 3, 4, 4)), T((2, 3, 4, 4), "f64"), T((1, 3)), T((4, 3), domain="edge")):
        c = x.shape[1]
        stats = (T((c,), grad=False), T((c,), domain="pos", grad=False))
        for kwargs in (
            {},
            {"training": True},
            {"weight": T((c,)), "bias": T((c,))},
            {"training": True, "momentum": 0.3, "eps": 1e-3},
            {"weight": T((c + 1,))},
        ):
            b.add("F.batch_norm", _batch_norm, x, *stats, **kwargs)
        b.add("F.batch_norm", _batch_norm, x, None, None, training=True)
        b.add("F.batch_norm", _batch_norm, x, None, None)
        for shape, kwargs in (
            ((x.shape[-1],), {}),
            (x.shape[1:], {}),
            ((x.shape[-1],), {"weight": T((x.shape[-1],)), "bias": T((x.shape[-1],))}),
            ((x.shape[-1],), {"eps": 0.1}),
            ((7,), {}),
            (x.shape[-1], {"weight": T((x.shape[-1],))}),
        ):
            b.add("F.layer_norm", caller("F.layer_norm"), x, shape, **kwargs)
    for x in (T((2, 4, 3)), T((2, 4, 3, 3)), T((2, 4)), T((2, 4, 3, 3), "f64")):
        for groups, kwargs in ((2, {}), (1, {}), (4, {"weight": T((4,)), "bias": T((4,))}), (3, {}), (2, {"eps": 0.5})):
            b.add("F.group_norm", caller("F.group_norm"), x, groups, **kwargs)


FAMILIES = {
    "unary": elementwise_unary,
    "binary": elementwise_binary,
    "operators": operators,
    "ternary": ternary,
    "reductions": reductions,
    "sorting": sorting,
    "softmax": softmaxes,
    "shapes": shapes,
    "indexing": indexing,
    "gather_scatter": gather_scatter,
    "products": products,
    "creation": creation,
    "conversions": conversions,
    "losses": losses,
    "activations": activations,
    "convolutions": convolutions,
    "sequences": sequences,
    "views_inplace": views_inplace,
}


@functools.lru_cache(maxsize=1)
def configs() -> tuple[Case, ...]:
    """Every configured call, once, in a fixed order."""
    builder = Builder()
    for family in FAMILIES.values():
        family(builder)
    return tuple(builder.cases)


def covered_ops() -> set[str]:
    return {case.op for case in configs()}


def uncovered_names() -> list[str]:
    """Names of the surface that no case calls and that are not skipped with a reason."""
    ops = covered_ops()
    return [n for n in surface_names() if n not in ops and n not in SKIPPED]
