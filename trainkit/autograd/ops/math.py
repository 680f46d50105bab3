"""Element-wise arithmetic and math: each op states its derivative in its docstring.

``g`` is the gradient of the output; a backward returns one gradient per input (None where none is wanted).
Broadcast inputs get a gradient of the output's shape: the engine sums it back.
"""

from __future__ import annotations

import math as _math

import numpy as np

from ..backend import get_default_dtype, result_type, xp_of
from ..function import Op, device_error
from ..tensor import Tensor
from . import dual
from .copy import ToCopy

_NUMBERS = (bool, int, float)
_OPERANDS = (Tensor, *_NUMBERS)
_INT_OR_FLOAT = (int, float)


def operand(v):
    """Tensors and Python numbers pass as they are (NumPy 2 treats numbers as weakly typed, as PyTorch does)."""
    if isinstance(v, _OPERANDS):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray) or type(v).__module__.startswith("cupy"):
        return Tensor._make(v)
    raise TypeError(f"unsupported operand type for a tensor op: {type(v).__name__}")


def cast(t: Tensor, np_dtype) -> Tensor:
    return ToCopy.apply(t, dtype=np_dtype, device=None)


def promote(a, b, true_divide: bool = False):
    """Cast tensor operands to the dtype PyTorch's promotion gives ``a (op) b``; numbers stay numbers."""
    # The common cases first: a floating tensor with a tensor of its own dtype, or with a Python int or float, keeps
    # its dtype (checked here without the general rules, which cost more than many small ops themselves).
    if isinstance(a, Tensor):
        if (type(b) in _INT_OR_FLOAT or isinstance(b, Tensor) and b._data.dtype is a._data.dtype) \
                and a._data.dtype.kind == "f":
            return a, b
    elif type(a) in _INT_OR_FLOAT and isinstance(b, Tensor) and b._data.dtype.kind == "f":
        return a, b
    a, b = operand(a), operand(b)
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    da = a._data if ta else a
    db = b._data if tb else b
    if ta and tb and da.dtype is db.dtype:
        target = da.dtype
    else:
        target = result_type(da, db)
    if true_divide and target.kind != "f":
        target = get_default_dtype().np
    if ta and da.dtype != target:
        a = cast(a, target)
    if tb and db.dtype != target:
        b = cast(b, target)
    return a, b


def binary(cls, a, b, true_divide: bool = False) -> Tensor:
    a, b = promote(a, b, true_divide)
    return cls.apply(a, b)

class Add(Op, name="AddBackward0"):
    """out = x + y.   dx = g,  dy = g."""

    def forward(self, x, y):
        return x + y

    def backward(self, g):
        return g, g


class Sub(Op, name="SubBackward0"):
    """out = x - y.   dx = g,  dy = -g."""

    def forward(self, x, y):
        return x - y

    def backward(self, g):
        return g, -g if self.next_functions[1][0] is not None else None


class Rsub(Op, name="RsubBackward1"):
    """out = other - x for a number other.   dx = -g."""

    def forward(self, x, other):
        return other - x

    def backward(self, g):
        return -g


class Reciprocal(Op, name="ReciprocalBackward0"):
    """out = 1 / x.   dx = -g * out^2."""

    save_output = True

    def forward(self, x):
        return 1 / x

    def backward(self, g):
        (out,) = self.saved_tensors
        return -g * out * out


class Mul(Op, name="MulBackward0"):
    """out = x * y.   dx = g * y,  dy = g * x."""

    save_inputs = (0, 1)
    save_only_for = {0: 1, 1: 0}

    def forward(self, x, y):
        return x * y

    def backward(self, g):
        x, y = self.saved_tensors
        (fx, _), (fy, _) = self.next_functions
        return (g * y if fx is not None else None, g * x if fy is not None else None)


class Div(Op, name="DivBackward0"):
    """out = x / y.   dx = g / y,  dy = -g * x / y^2."""

    save_inputs = (0, 1)
    save_only_for = {0: 1}

    def forward(self, x, y):
        return x / y

    def backward(self, g):
        x, y = self.saved_tensors
        gx = g / y
        gy = -gx * x / y if self.next_functions[1][0] is not None else None
        return (gx if self.next_functions[0][0] is not None else None), gy


class Neg(Op, name="NegBackward0"):
    """out = -x.   dx = -g."""

    def forward(self, x):
        return -x

    def backward(self, g):
        return -g


class Pow(Op, name="PowBackward0"):
    """out = x ** p for a number p.   dx = g * p * x^(p-1)."""

    save_inputs = (0,)

    def forward(self, x, p):
        self.p = p
        return x**p

    def backward(self, g):
        (x,) = self.saved_tensors
        p = self.p
        if p == 0:
            return g * 0
        return g * (p * x ** (p - 1))


class PowTensor(Op, name="PowBackward1"):
    """out = x ** y.   dx = g * y * x^(y-1),  dy = g * out * log(x)  (0 where x = 0 and y >= 0)."""

    save_inputs = (0, 1)
    save_output = True

    def forward(self, x, y):
        return x**y

    def backward(self, g):
        x, y, out = self.saved_tensors
        gx = g * y * x ** (y - 1) if self.next_functions[0][0] is not None else None
        gy = None
        if self.next_functions[1][0] is not None:
            xd, yd = dual.data(x), dual.data(y)
            zero = (xd == 0) & (yd >= 0)
            gy = dual.where(zero, 0, g * out * dual.log(dual.where(zero, 1, x)))
        return gx, gy


class RPow(Op, name="PowBackward2"):
    """out = b ** x for a number b.   dx = g * out * log(b)."""

    save_output = True

    def forward(self, x, base):
        self.base = base
        return base**x

    def backward(self, g):
        (out,) = self.saved_tensors
        return g * out * (_math.log(self.base) if self.base > 0 else 0.0)


class Exp(Op, name="ExpBackward0"):
    """out = e^x.   dx = g * out."""

    save_output = True

    def forward(self, x):
        return xp_of(x).exp(x)

    def backward(self, g):
        (out,) = self.saved_tensors
        return g * out


class Log(Op, name="LogBackward0"):
    """out = ln x.   dx = g / x."""

    save_inputs = (0,)

    def forward(self, x):
        return xp_of(x).log(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return g / x


class Sqrt(Op, name="SqrtBackward0"):
    """out = sqrt(x).   dx = g / (2 out)."""

    save_output = True

    def forward(self, x):
        return xp_of(x).sqrt(x)

    def backward(self, g):
        (out,) = self.saved_tensors
        return g / (2 * out)


class Abs(Op, name="AbsBackward0"):
    """out = |x|.   dx = g * sign(x)  (0 at x = 0)."""

    save_inputs = (0,)

    def forward(self, x):
        return xp_of(x).abs(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        xd = dual.data(x)
        return g * xp_of(xd).sign(xd)


class Clamp(Op, name="ClampBackward1"):
    """out = min(max(x, lo), hi).   dx = g where lo <= x <= hi, else 0."""

    save_inputs = (0,)

    def forward(self, x, lo, hi):
        self.lo, self.hi = lo, hi
        return xp_of(x).clip(x, lo, hi)

    def backward(self, g):
        (x,) = self.saved_tensors
        xd = dual.data(x)
        inside = xd >= self.lo if self.lo is not None else None
        if self.hi is not None:
            inside = xd <= self.hi if inside is None else inside & (xd <= self.hi)
        return dual.keep(g, inside)


class ClampMin(Clamp, name="ClampMinBackward0"):
    pass


class ClampMax(Clamp, name="ClampMaxBackward0"):
    pass


class ClampTensor(Op, name="ClampBackward0"):
    """out = min(max(x, lo), hi) for tensors lo, hi.   dx = g where lo <= x <= hi,  dlo = g where x < lo,
    dhi = g where x > hi (and not below lo)."""

    save_inputs = (0, 1, 2)

    def forward(self, x, lo, hi):
        xp = xp_of(x)
        return xp.minimum(xp.maximum(x, lo), hi)

    def backward(self, g):
        x, lo, hi = (dual.data(v) for v in self.saved_tensors)
        below = x < lo
        above = (x > hi) & ~below
        return dual.keep(g, ~(below | above)), dual.keep(g, below), dual.keep(g, above)


class Where(Op, name="WhereBackward0"):
    """out = x where cond else y.   dx = g where cond,  dy = g where not cond."""

    def forward(self, x, y, cond):
        self.extra = cond
        return xp_of(cond).where(cond, x, y)

    def backward(self, g):
        cond = self.extra
        (fx, _), (fy, _) = self.next_functions
        return (
            dual.keep(g, cond) if fx is not None else None,
            dual.keep(g, ~cond) if fy is not None else None,
        )


class Maximum(Op, name="MaximumBackward0"):
    """out = max(x, y).   dx = g where x > y,  dy = g where y > x; a tie gives each half."""

    save_inputs = (0, 1)

    def forward(self, x, y):
        return xp_of(x).maximum(x, y)

    def backward(self, g):
        x, y = self.saved_tensors
        share = _share(dual.data(x), dual.data(y), dual.data(g).dtype)
        return g * share, g * (1 - share)


class Minimum(Op, name="MinimumBackward0"):
    """out = min(x, y).   dx = g where x < y,  dy = g where y < x; a tie gives each half."""

    save_inputs = (0, 1)

    def forward(self, x, y):
        return xp_of(x).minimum(x, y)

    def backward(self, g):
        x, y = self.saved_tensors
        share = _share(dual.data(y), dual.data(x), dual.data(g).dtype)
        return g * share, g * (1 - share)


def _share(winner, loser, dtype):
    """1 where ``winner`` is strictly greater, 0.5 on ties, else 0: x's share of the gradient of max(x, y)."""
    return (winner > loser).astype(dtype) + (winner == loser).astype(dtype) * 0.5


# --------------------------------------------------------------------------------------------------- functions
def add(input, other, *, alpha=1) -> Tensor:
    """``input + alpha * other``.

    >>> import trainkit
    >>> trainkit.add(trainkit.ones(2), trainkit.ones(2), alpha=2)
    tensor([3., 3.])
    """
    if alpha != 1:
        other = mul(other, alpha)
    elif isinstance(input, Tensor) and isinstance(other, Tensor) and input._data.dtype is other._data.dtype:
        return Add.apply(input, other)  # the common case, without the promotion step
    return binary(Add, input, other)


def sub(input, other, *, alpha=1) -> Tensor:
    """``input - alpha * other``."""
    if alpha != 1:
        other = mul(other, alpha)
    elif isinstance(input, Tensor) and isinstance(other, Tensor) and input._data.dtype is other._data.dtype:
        return Sub.apply(input, other)  # as in add
    return binary(Sub, input, other)


def rsub(input, other, *, alpha=1) -> Tensor:
    """``other - alpha * input``."""
    if alpha != 1:
        input = mul(input, alpha)
    if isinstance(other, _NUMBERS):
        x, other = promote(input, other)
        return Rsub.apply(x, other=other)
    return binary(Sub, other, input)


def reciprocal(input) -> Tensor:
    """1 / x element-wise (integers give floats)."""
    if input._data.dtype.kind != "f":
        input = cast(input, get_default_dtype().np)
    return Reciprocal.apply(input)


def mul(input, other) -> Tensor:
    """``input * other``, broadcasting as NumPy does."""
    if isinstance(input, Tensor) and isinstance(other, Tensor) and input._data.dtype is other._data.dtype:
        return Mul.apply(input, other)  # as in add
    return binary(Mul, input, other)


def div(input, other, *, rounding_mode: str | None = None) -> Tensor:
    """True division (integers give floats); ``rounding_mode='floor'|'trunc'`` rounds and has no gradient."""
    if rounding_mode is None:
        if isinstance(other, Tensor) and isinstance(input, _NUMBERS):
            return mul(reciprocal(other), input)  # as PyTorch: number / x is reciprocal(x) * number
        return binary(Div, input, other, true_divide=True)
    a, b = promote(input, other)
    da, db = getattr(a, "_data", a), getattr(b, "_data", b)
    xp = xp_of(da if isinstance(a, Tensor) else db)
    if rounding_mode == "floor":
        out = xp.floor_divide(da, db)
    elif rounding_mode == "trunc":
        out = xp.trunc(xp.true_divide(da, db)).astype(xp.result_type(da, db))
    else:
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor', got '{rounding_mode}'")
    return Tensor._make(xp.asarray(out))


true_divide = divide = div
multiply = mul
subtract = sub


def neg(input) -> Tensor:
    return Neg.apply(input)


negative = neg


def pow(input, exponent) -> Tensor:
    """``input ** exponent`` for tensors or numbers on either side."""
    if not isinstance(input, Tensor):
        base, exponent = promote(input, exponent)
        return RPow.apply(exponent, base=base)
    if isinstance(exponent, Tensor):
        return binary(PowTensor, input, exponent)
    exponent = operand(exponent)
    if isinstance(exponent, float) and input._data.dtype.kind != "f":
        input = cast(input, get_default_dtype().np)
    return Pow.apply(input, p=exponent)


def exp(input) -> Tensor:
    return Exp.apply(input)


def log(input) -> Tensor:
    return Log.apply(input)


def sqrt(input) -> Tensor:
    return Sqrt.apply(input)


def abs(input) -> Tensor:
    return Abs.apply(input)


absolute = abs


def clamp(input, min=None, max=None) -> Tensor:
    """Limit values to ``[min, max]``; either bound may be None, a number or a tensor."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        inf = float("inf")
        lo = min if isinstance(min, Tensor) else _as_tensor_like(-inf if min is None else min, input)
        hi = max if isinstance(max, Tensor) else _as_tensor_like(inf if max is None else max, input)
        return ClampTensor.apply(input, lo, hi)
    return Clamp.apply(input, lo=min, hi=max)


clip = clamp


def clamp_min(input, min) -> Tensor:
    """max(x, min) element-wise."""
    if isinstance(min, Tensor):
        return clamp(input, min=min)
    return ClampMin.apply(input, lo=min, hi=None)


def clamp_max(input, max) -> Tensor:
    """min(x, max) element-wise."""
    if isinstance(max, Tensor):
        return clamp(input, max=max)
    return ClampMax.apply(input, lo=None, hi=max)


def where(condition, input=None, other=None) -> Tensor:
    """Elements of ``input`` where ``condition`` holds, else of ``other`` (numbers allowed on either side)."""
    if input is None and other is None:
        return tuple(Tensor._make(i) for i in xp_of(condition._data).nonzero(condition._data))
    if not isinstance(condition, Tensor) or condition._data.dtype.kind != "b":
        raise RuntimeError("where expected condition to be a boolean tensor")
    x, y = promote(input, other)
    return Where.apply(x, y, cond=condition._data)


def maximum(input, other) -> Tensor:
    return binary(Maximum, input, _as_tensor_like(other, input))


def minimum(input, other) -> Tensor:
    return binary(Minimum, input, _as_tensor_like(other, input))


def _as_tensor_like(v, like):
    if isinstance(v, Tensor):
        return v
    return Tensor._make(xp_of(like._data).asarray(v, dtype=like._data.dtype))


def sign(input) -> Tensor:
    """-1, 0 or 1 by the sign of each element (no gradient: it is zero almost everywhere)."""
    return Tensor._make(xp_of(input._data).sign(input._data))


def _compare(ufunc_name: str):
    def compare(input, other) -> Tensor:
        a, b = operand(input), operand(other)
        da = a._data if isinstance(a, Tensor) else a
        db = b._data if isinstance(b, Tensor) else b
        if isinstance(a, Tensor) and isinstance(b, Tensor) and type(da) is not type(db):
            raise device_error((a, b))
        xp = xp_of(da if isinstance(a, Tensor) else db)
        return Tensor._make(xp.asarray(getattr(xp, ufunc_name)(da, db)))

    compare.__name__ = ufunc_name
    compare.__doc__ = f"Element-wise ``{ufunc_name}`` as a bool tensor (no gradient)."
    return compare


eq = _compare("equal")
ne = _compare("not_equal")
lt = _compare("less")
le = _compare("less_equal")
gt = _compare("greater")
ge = _compare("greater_equal")
logical_and = _compare("logical_and")
logical_or = _compare("logical_or")
logical_xor = _compare("logical_xor")
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


def logical_not(input) -> Tensor:
    return Tensor._make(xp_of(input._data).logical_not(input._data))


def all(input, dim=None, keepdim: bool = False) -> Tensor:
    """True where every element (over ``dim``, or all of them) is non-zero."""
    return Tensor._make(xp_of(input._data).asarray(input._data.all(axis=dim, keepdims=keepdim)))


def any(input, dim=None, keepdim: bool = False) -> Tensor:
    """True where some element (over ``dim``, or all of them) is non-zero."""
    return Tensor._make(xp_of(input._data).asarray(input._data.any(axis=dim, keepdims=keepdim)))


def isnan(input) -> Tensor:
    return Tensor._make(xp_of(input._data).isnan(input._data))


def isfinite(input) -> Tensor:
    return Tensor._make(xp_of(input._data).isfinite(input._data))


def floor_divide(input, other) -> Tensor:
    return div(input, other, rounding_mode="floor")


def remainder(input, other) -> Tensor:
    """Python-style remainder (sign of the divisor); no gradient."""
    a, b = promote(input, other)
    da, db = getattr(a, "_data", a), getattr(b, "_data", b)
    xp = xp_of(da if isinstance(a, Tensor) else db)
    return Tensor._make(xp.asarray(xp.remainder(da, db)))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    xp = xp_of(input._data)
    return bool(xp.allclose(input._data, other._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input, other) -> bool:
    """True when both tensors have the same shape and elements."""
    return input.shape == other.shape and bool((input._data == other._data).all())
