"""More element-wise math: exp/log variants, rsqrt, square, erf, the rounding ops, fmod, lerp, addcmul, addcdiv
and a few tests of values. Each op states its derivative in its docstring; the ops that are one formula each way
are rows of ``ops.table``.

``g`` is the gradient of the output; a backward returns one gradient per input (None where none is wanted) and
works on arrays and on Tensors alike (``create_graph``). Integer inputs of the floating functions are computed in
the default float dtype, as in PyTorch; binary ops broadcast and promote as ``math.promote`` does.
"""

from __future__ import annotations

from ..backend import kind_of, xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual, kernels, no_gradient
from . import math as _m
from .kernels import check_int_divisor, not_implemented
from .no_gradient import (
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
)
from .table import elementwise

__all__ = [
    "addcdiv",
    "addcmul",
    "bitwise_and",
    "bitwise_left_shift",
    "bitwise_not",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "ceil",
    "erf",
    "exp2",
    "expm1",
    "floor",
    "fmod",
    "frac",
    "isclose",
    "isinf",
    "lerp",
    "log10",
    "log1p",
    "log2",
    "round",
    "rsqrt",
    "square",
    "trunc",
]


def _promote_all(*values, floating: bool = False) -> list:
    """Cast the tensor operands to one dtype by PyTorch's promotion (numbers stay numbers)."""
    first, rest = values[0], list(values[1:])
    for i, v in enumerate(rest):
        first, rest[i] = _m.promote(first, v, floating)
    for i, v in enumerate(rest):
        first, rest[i] = _m.promote(first, v, floating)
    return [first, *rest]


# ------------------------------------------------------------------------------------------------ table rows
Exp2, exp2 = elementwise("exp2", "Exp2Backward0", "out", "xp.exp2(x)", "g * out * LN2", "2^x element-wise.")
Expm1, expm1 = elementwise(
    "expm1", "Expm1Backward0", "out", "xp.expm1(x)", "g * (out + 1)", "e^x - 1, accurate near 0."
)
Log2, log2 = elementwise(
    "log2", "Log2Backward0", "x", "xp.log2(x)", "g / (x * LN2)", "The base-2 logarithm element-wise."
)
Log10, log10 = elementwise(
    "log10", "Log10Backward0", "x", "xp.log10(x)", "g / (x * LN10)", "The base-10 logarithm element-wise."
)
Log1p, log1p = elementwise("log1p", "Log1PBackward0", "x", "xp.log1p(x)", "g / (1 + x)", "ln(1 + x), accurate near 0.")
Rsqrt, rsqrt = elementwise(
    "rsqrt", "RsqrtBackward0", "out", "1 / xp.sqrt(x)", "-0.5 * g * out * out * out", "1 / sqrt(x) element-wise."
)
Erf, erf = elementwise(
    "erf", "ErfBackward0", "x", "erf(x)", "g * (TWO_OVER_SQRT_PI * exp(-(x * x)))", "The error function, element-wise."
)
# frac and the rounding functions check their dtypes first: their functions are written below
Frac, _ = elementwise("frac", "FracBackward0", "", "x - xp.trunc(x)", "g")
Floor, _ = elementwise("floor", "FloorBackward0", "", "xp.floor(x)", "g * 0")
Ceil, _ = elementwise("ceil", "CeilBackward0", "", "xp.ceil(x)", "g * 0")
Trunc, _ = elementwise("trunc", "TruncBackward0", "", "xp.trunc(x)", "g * 0")
Round, _ = elementwise("round", "RoundBackward0", "", "xp.rint(x)", "g * 0")


class RoundDecimals(Op, name="RoundBackward1"):
    """out = x rounded half to even to ``decimals`` digits.   dx = 0."""

    def forward(self, x, decimals):
        return xp_of(x).round(x, decimals)

    def backward(self, g):
        return g * 0


class Fmod(Op, name="FmodBackward0"):
    """out = fmod(x, c) for a number c (the sign of x).   dx = g."""

    def forward(self, x, other):
        if kind_of(x.dtype) != "f":
            check_int_divisor(other)
        return xp_of(x).fmod(x, other)

    def backward(self, g):
        return g


class FmodTensor(Op, name="FmodBackward1"):
    """out = fmod(x, y) = x - trunc(x / y) y.   dx = g,  dy = -g * trunc(x / y)."""

    save_inputs = (0, 1)
    save_only_for = {0: 1, 1: 1}

    def forward(self, x, y):
        if kind_of(x.dtype) != "f":
            check_int_divisor(y)
        return xp_of(x).fmod(x, y)

    def backward(self, g):
        (fx, _), (fy, _) = self.next_functions
        gy = None
        if fy is not None:
            x, y = (dual.data(v) for v in self.saved_tensors)
            gy = -g * xp_of(x).trunc(x / y)
        return (g if fx is not None else None), gy


class Lerp(Op, name="LerpBackward0"):
    """out = x + w (end - x) for a number w.   dx = g (1 - w),  dend = g w."""

    def forward(self, x, end, weight):
        self.weight = weight
        return kernels.lerp(x, end, weight)

    def backward(self, g):
        w = self.weight
        (fx, _), (fe, _) = self.next_functions
        return (g * (1 - w) if fx is not None else None, g * w if fe is not None else None)


class LerpTensor(Op, name="LerpBackward1"):
    """out = x + w (end - x).   dx = g (1 - w),  dend = g w,  dw = g (end - x)."""

    save_inputs = (0, 1, 2)
    save_only_for = {0: 2, 1: 2}

    def forward(self, x, end, weight):
        return kernels.lerp(x, end, weight)

    def backward(self, g):
        (fx, _), (fe, _), (fw, _) = self.next_functions
        saved = self.saved_tensors
        w = saved[2]
        gw = g * (saved[1] - saved[0]) if fw is not None else None
        return (g * (1 - w) if fx is not None else None, g * w if fe is not None else None, gw)


class Addcmul(Op, name="AddcmulBackward0"):
    """out = x + v t1 t2.   dx = g,  dt1 = g v t2,  dt2 = g v t1."""

    save_inputs = (1, 2)
    save_only_for = {1: 2, 2: 1}

    def forward(self, x, t1, t2, value):
        self.value = value
        return x + value * (t1 * t2)

    def backward(self, g):
        t1, t2 = self.saved_tensors
        (fx, _), (f1, _), (f2, _) = self.next_functions
        v = self.value
        return (
            g if fx is not None else None,
            g * v * t2 if f1 is not None else None,
            g * v * t1 if f2 is not None else None,
        )


class Addcdiv(Op, name="AddcdivBackward0"):
    """out = x + v t1 / t2.   dx = g,  dt1 = g v / t2,  dt2 = -g v t1 / t2^2."""

    save_inputs = (1, 2)
    save_only_for = {1: 2}

    def forward(self, x, t1, t2, value):
        self.value = value
        return x + value * (t1 / t2)

    def backward(self, g):
        t1, t2 = self.saved_tensors
        (fx, _), (f1, _), (f2, _) = self.next_functions
        g1 = g * self.value / t2
        return (
            g if fx is not None else None,
            g1 if f1 is not None else None,
            -g1 * t1 / t2 if f2 is not None else None,
        )


def square(input) -> Tensor:
    """x * x (as ``x ** 2``: integers stay integers, bools give int64)."""
    return _m.pow(input, 2)


def _exact(input, kernel: str | None = None) -> bool:
    """True for integer and bool tensors; with ``kernel``, bool tensors are PyTorch's NotImplementedError."""
    kind = input._data.dtype.kind
    if kernel is not None and kind == "b":
        raise not_implemented(kernel, input._data.dtype)
    return kind in "biu"


def floor(input) -> Tensor:
    """The largest integer not above x (integer tensors are returned as a copy); the gradient is zero."""
    return Tensor._make(input._data.copy()) if _exact(input, "floor_vml_cpu") else Floor.apply(input)


def ceil(input) -> Tensor:
    """The smallest integer not below x; the gradient is zero."""
    return Tensor._make(input._data.copy()) if _exact(input, "ceil_vml_cpu") else Ceil.apply(input)


def trunc(input) -> Tensor:
    """x rounded toward zero; the gradient is zero."""
    return Tensor._make(input._data.copy()) if _exact(input, "trunc_vml_cpu") else Trunc.apply(input)


fix = trunc


def round(input, *, decimals: int = 0) -> Tensor:
    """x rounded half to even, to ``decimals`` decimal digits; the gradient is zero.

    >>> import trainkit
    >>> from trainkit.autograd.ops.elementwise import round
    >>> round(trainkit.tensor([0.5, 1.5, 1.2345]), decimals=0)
    tensor([0., 2., 1.])
    """
    if decimals == 0:
        return Tensor._make(input._data.copy()) if _exact(input, "round_vml_cpu") else Round.apply(input)
    if _exact(input):
        raise not_implemented("round_cpu", input._data.dtype)
    return RoundDecimals.apply(input, decimals=decimals)


def frac(input) -> Tensor:
    """x - trunc x (the sign of x); the gradient passes through unchanged."""
    if _exact(input):
        raise NotImplementedError(f"\"frac\" not implemented for '{str(input.dtype).rsplit('.', 1)[-1]}'")
    return Frac.apply(input)


def fmod(input, other) -> Tensor:
    """The C remainder ``input - trunc(input / other) * other``: it has the sign of ``input``."""
    if not isinstance(input, Tensor):
        raise TypeError(
            f"fmod() received an invalid combination of arguments - got ({type(input).__name__}, "
            f"{type(other).__name__})"
        )
    x, other = _m.promote(input, _m.operand(other))
    if x._data.dtype.kind == "b":
        raise not_implemented("fmod_cpu", x._data.dtype)
    if isinstance(other, Tensor):
        return FmodTensor.apply(x, other)
    return Fmod.apply(x, other=other)


def lerp(input, end, weight) -> Tensor:
    """``input + weight * (end - input)``; ``weight`` is a number or a tensor of ``input``'s floating dtype."""
    dtype = input._data.dtype
    if kind_of(dtype) != "f":
        raise not_implemented("lerp_kernel_scalar" if not isinstance(weight, Tensor) else "lerp_kernel_tensor", dtype)
    for name, v in (("end", end), ("weight", weight)):
        if isinstance(v, Tensor) and v._data.dtype != dtype:
            raise RuntimeError(
                f"expected dtype {_dtype_name(dtype)} for `{name}` but got dtype {_dtype_name(v._data.dtype)}"
            )
    if isinstance(weight, Tensor):
        return LerpTensor.apply(input, end, weight)
    return Lerp.apply(input, end, weight=weight)


def _dtype_name(dtype) -> str:
    """PyTorch's C++ name of a dtype in messages: float, double, long, ..."""
    return {
        "float32": "float",
        "float64": "double",
        "float16": "c10::Half",
        "int64": "long int",
        "int32": "int",
        "bool": "bool",
    }.get(dtype.name, dtype.name)


def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 * tensor2`` (for integer tensors ``value`` is taken as an integer, as in PyTorch)."""
    x, t1, t2 = _promote_all(input, tensor1, tensor2)
    if x._data.dtype.kind in "biu":
        value = int(value)
    return Addcmul.apply(x, t1, t2, value=value)


def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 / tensor2``."""
    if _exact(tensor1) and _exact(tensor2):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform "
            "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
            "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes."
        )
    x, t1, t2 = _promote_all(input, tensor1, tensor2)
    return Addcdiv.apply(x, t1, t2, value=value)


def isinf(input) -> Tensor:
    """True where an element is +inf or -inf (no gradient)."""
    return Tensor._make(xp_of(input._data).isinf(input._data))


isclose = no_gradient.isclose
