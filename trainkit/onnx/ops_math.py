"""Converters of the element-wise ops: arithmetic, powers and logarithms, rounding, trigonometry, comparisons
and logic, casts, ``where``, ``masked_fill``, ``clamp``, constant padding, triangles and ``cumsum``. One row per op
class, keyed ``"<module>.<node name>"`` as ``Op`` subclasses are named (``math.MulBackward0``), or ``tensor.<name>``
for the Tensor methods recorded by name (``tensor.eq``).
"""

from __future__ import annotations

import math

import numpy as np

from .context import Context, elem_type, operands, unary

__all__ = ["MATH_CONVERTERS"]


def _binary(op_type: str, swap: bool = False):
    def convert(cx: Context) -> None:
        a, b = operands(cx)
        cx.bind(cx.node(op_type, [b, a] if swap else [a, b]))

    convert.__doc__ = f"ONNX {op_type} of the two inputs (broadcasting as PyTorch does)."
    return convert


def _scaled(cx: Context, name: str, alpha) -> str:
    return name if alpha in (None, 1) else cx.node("Mul", [name, cx.const_like(alpha, name)])


def _add(cx: Context) -> None:
    a, b = operands(cx)
    cx.bind(cx.node("Add", [a, _scaled(cx, b, cx.params.get("alpha"))]))


def _sub(cx: Context) -> None:
    a, b = operands(cx)
    cx.bind(cx.node("Sub", [a, _scaled(cx, b, cx.params.get("alpha"))]))


def _rsub(cx: Context) -> None:
    """``other - x`` (``torch.rsub``, ``2 - x``)."""
    a, b = operands(cx)
    cx.bind(cx.node("Sub", [b, a]))


def _div_mode(cx: Context) -> None:
    a, b = operands(cx)
    q = cx.node("Div", [a, b])
    mode = cx.params.get("mode")
    if mode == "floor":
        q = cx.node("Floor", [q])
    elif mode == "trunc":
        q = cx.node("Mul", [cx.node("Floor", [cx.node("Abs", [q])]), cx.node("Sign", [q])])
    cx.bind(q)


def _pow_scalar(cx: Context) -> None:
    x = cx.input(0)
    p = cx.params.get("p", cx.rec.inputs[1] if len(cx.rec.inputs) > 1 else None)
    if p == 2:
        cx.bind(cx.node("Mul", [x, x]))
    elif p == 0.5:
        cx.bind(cx.node("Sqrt", [x]))
    else:
        cx.bind(cx.node("Pow", [x, cx.const_like(p, x)]))


def _pow_base(cx: Context) -> None:
    """``base ** x`` with a number as the base."""
    x = cx.input(0)
    base = cx.params.get("base", cx.rec.inputs[1] if len(cx.rec.inputs) > 1 else None)
    cx.bind(cx.node("Pow", [cx.const_like(base, x), x]))


def _where(cx: Context) -> None:
    x = cx.input(0)
    y = cx.input(1, like=x)
    cx.bind(cx.node("Where", [cx.g.value(cx.arg(2, "cond")), x, y]))


def _masked_fill(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Where", [cx.input(1), cx.input(2, like=x), x]))


def _clamp(cx: Context) -> None:
    x = cx.input(0)
    lo, hi = cx.arg(1, "lo"), cx.arg(2, "hi")
    if hasattr(lo, "shape") or hasattr(hi, "shape"):  # tensor bounds: Max and Min broadcast, Clip does not
        out = x if lo is None else cx.node("Max", [x, cx.g.value(lo, like=x)])
        cx.bind(out if hi is None else cx.node("Min", [out, cx.g.value(hi, like=x)]))
        return
    args = [x, "" if lo is None else cx.const_like(lo, x), "" if hi is None else cx.const_like(hi, x)]
    while args[-1] == "":
        args.pop()
    cx.bind(cx.node("Clip", args))


def _to_copy(cx: Context) -> None:
    from onnx import helper

    dtype = cx.params.get("dtype")
    if dtype is None:
        cx.bind(cx.node("Identity", [cx.input(0)]))
        return
    cx.bind(cx.node("Cast", [cx.input(0)], to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype))))


def _trilu(upper: int):
    """``triu``/``tril``: ONNX ``Trilu`` from opset 14; before it, ``Where`` of a mask of column - row >= k (or
    <= k) built from the run-time sizes."""

    def convert(cx: Context) -> None:
        x = cx.input(0)
        if cx.opset >= 14:
            cx.bind(cx.node("Trilu", [x, _k(cx)], upper=upper))
            return
        rank = len(cx.shape(0))
        shape = cx.node("Shape", [x])
        zero, one = cx.g.const(np.asarray(0, np.int64)), cx.g.const(np.asarray(1, np.int64))

        def positions(axis: int) -> str:
            n = cx.node("Squeeze", [cx.node("Gather", [shape, cx.g.ints([axis])], axis=0), cx.g.ints([0])])
            return cx.node("Range", [zero, n, one])

        rows = cx.node("Unsqueeze", [positions(rank - 2), cx.g.ints([1])])
        offset = cx.node("Sub", [positions(rank - 1), rows])  # column - row
        keep = cx.node("GreaterOrEqual" if upper else "LessOrEqual", [offset, _k(cx)])
        cx.bind(cx.node("Where", [keep, x, cx.const_like(0, x)]))

    return convert


def _k(cx: Context) -> str:
    return cx.g.const(np.asarray(int(cx.params.get("diagonal", 0)), dtype=np.int64))


def _cumsum(cx: Context) -> None:
    dim = cx.params.get("dim", cx.params.get("axis"))
    cx.bind(cx.node("CumSum", [cx.input(0), cx.g.const(np.asarray(int(dim), dtype=np.int64))]))


def _compare(op_type: str, negate: bool = False):
    def convert(cx: Context) -> None:
        a, b = operands(cx)
        out = cx.node(op_type, [a, b])
        cx.bind(cx.node("Not", [out]) if negate else out)

    convert.__doc__ = f"ONNX {op_type} of two tensors (or a tensor and a number): a bool tensor."
    return convert


def _as_bool(cx: Context, name: str) -> str:
    if cx.dtype(name) == np.bool_:
        return name
    if cx.rec.target.__name__ in ("and", "or", "xor", "invert"):
        raise cx.refuse("a bitwise op on an integer tensor (only bool tensors are exported)")
    return cx.node("Cast", [name], to=9)  # logical ops: nonzero is True


def _logical(op_type: str):
    """``&``, ``|``, ``^`` of bool tensors, ``logical_and`` and the rest of any tensors."""

    def convert(cx: Context) -> None:
        a, b = operands(cx)
        cx.bind(cx.node(op_type, [_as_bool(cx, a), _as_bool(cx, b)]))

    return convert


def _invert(cx: Context) -> None:
    cx.bind(cx.node("Not", [_as_bool(cx, cx.input(0))]))


def _rsqrt(cx: Context) -> None:
    cx.bind(cx.node("Reciprocal", [cx.node("Sqrt", [cx.input(0)])]))


def _log1p(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Log", [cx.node("Add", [x, cx.const_like(1, x)])]))


def _expm1(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Sub", [cx.node("Exp", [x]), cx.const_like(1, x)]))


def _constant_pad(cx: Context) -> None:
    """``F.pad(x, widths, value=v)``: ``Pad`` with the amounts before and after each axis (negative crops)."""
    x = cx.input(0)
    widths = [(int(b), int(a)) for b, a in cx.params["widths"]]
    pads = [b for b, _ in widths] + [a for _, a in widths]
    cx.bind(cx.node("Pad", [x, cx.g.ints(pads), cx.const_like(cx.params.get("value", 0) or 0, x)], mode="constant"))


def _cast(cx: Context) -> None:
    """``x.to(dtype)``, ``x.bool()``, ``x.long()``, ...: ``Cast`` to the dtype of the result."""
    from onnx import helper

    x = cx.input(0)
    dtype = np.dtype(cx.out_arrays()[0].dtype)
    if cx.dtype(x) == dtype:
        cx.bind(cx.node("Identity", [x]))
        return
    cx.bind(cx.node("Cast", [x], to=helper.np_dtype_to_tensor_dtype(dtype)))


def _exp2(cx: Context) -> None:
    x = cx.input(0)
    cx.bind(cx.node("Pow", [cx.const_like(2.0, x), x]))


def _log_base(base: float):
    def convert(cx: Context) -> None:
        x = cx.input(0)
        cx.bind(cx.node("Div", [cx.node("Log", [x]), cx.const_like(math.log(base), x)]))

    return convert


def _inplace(op_type: str):
    """``x += y``, ``x.add_(y, alpha=2)`` and the others: the result is the tensor's new value."""

    def convert(cx: Context) -> None:
        if cx.params.get("rounding_mode") is not None:
            raise cx.refuse("div_ with rounding_mode (write x = torch.div(x, y, rounding_mode=...))")
        a, b = operands(cx)
        if cx.dtype(b) is not None and cx.dtype(b) != cx.dtype(a):  # the result keeps the tensor's dtype
            b = cx.node("Cast", [b], to=elem_type(cx.dtype(a)))
        alpha = cx.arg(2, "alpha", 1)
        if alpha != 1:
            b = cx.node("Mul", [b, cx.const_like(alpha, a)])
        cx.bind(cx.node(op_type, [a, b]))

    return convert


MATH_CONVERTERS = {
    "tensor.add_": _inplace("Add"),
    "tensor.sub_": _inplace("Sub"),
    "tensor.mul_": _inplace("Mul"),
    "tensor.div_": _inplace("Div"),
    "elementwise.Exp2Backward0": _exp2,
    "elementwise.Log2Backward0": _log_base(2.0),
    "elementwise.Log10Backward0": _log_base(10.0),
    "tensor.to": _cast,
    "elementwise.RsqrtBackward0": _rsqrt,
    "elementwise.Log1PBackward0": _log1p,
    "elementwise.Expm1Backward0": _expm1,
    "padding.ConstantPadNdBackward0": _constant_pad,
    "tensor.eq": _compare("Equal"),
    "tensor.ne": _compare("Equal", negate=True),
    "tensor.lt": _compare("Less"),
    "tensor.le": _compare("LessOrEqual"),
    "tensor.gt": _compare("Greater"),
    "tensor.ge": _compare("GreaterOrEqual"),
    "tensor.and": _logical("And"),
    "tensor.or": _logical("Or"),
    "tensor.xor": _logical("Xor"),
    "tensor.logical_and": _logical("And"),
    "tensor.logical_or": _logical("Or"),
    "tensor.logical_xor": _logical("Xor"),
    "tensor.invert": _invert,
    "tensor.logical_not": _invert,
    "tensor.isnan": unary("IsNaN"),
    "math.AddBackward0": _add,
    "math.SubBackward0": _sub,
    "math.RsubBackward0": _rsub,
    "math.RsubBackward1": _rsub,
    "math.MulBackward0": _binary("Mul"),
    "math.DivBackward0": _binary("Div"),
    "math.DivBackward2": _binary("Div"),
    "division.DivBackward2": _div_mode,
    "classification.DivBackward1": _binary("Div"),
    "math.NegBackward0": unary("Neg"),
    "math.ExpBackward0": unary("Exp"),
    "math.LogBackward0": unary("Log"),
    "math.SqrtBackward0": unary("Sqrt"),
    "math.AbsBackward0": unary("Abs"),
    "math.SignBackward0": unary("Sign"),
    "math.ReciprocalBackward0": unary("Reciprocal"),
    "math.WhereBackward0": _where,
    "elementwise.ErfBackward0": unary("Erf"),
    "elementwise.FloorBackward0": unary("Floor"),
    "elementwise.CeilBackward0": unary("Ceil"),
    "elementwise.RoundBackward0": unary("Round"),
    "trigonometric.SinBackward0": unary("Sin"),
    "trigonometric.CosBackward0": unary("Cos"),
    "trigonometric.TanBackward0": unary("Tan"),
    "trigonometric.AsinBackward0": unary("Asin"),
    "trigonometric.AcosBackward0": unary("Acos"),
    "trigonometric.AtanBackward0": unary("Atan"),
    "trigonometric.SinhBackward0": unary("Sinh"),
    "trigonometric.CoshBackward0": unary("Cosh"),
    "power.PowBackward0": _pow_scalar,
    "power.PowBackward1": _binary("Pow"),
    "power.PowBackward2": _pow_base,
    "clamp.ClampBackward0": _clamp,
    "clamp.ClampBackward1": _clamp,
    "clamp.ClampMinBackward0": _clamp,
    "clamp.ClampMinBackward1": _clamp,
    "clamp.ClampMaxBackward0": _clamp,
    "clamp.ClampMaxBackward1": _clamp,
    "clamp.MaximumBackward0": _binary("Max"),
    "clamp.MinimumBackward0": _binary("Min"),
    "masking.MaskedFillBackward0": _masked_fill,
    "masking.MaskedFillBackward1": _masked_fill,
    "copy.CloneBackward0": unary("Identity"),
    "copy.ToCopyBackward0": _to_copy,
    "triangular.TrilBackward0": _trilu(0),
    "triangular.TriuBackward0": _trilu(1),
    "cumulative.CumsumBackward0": _cumsum,
}
