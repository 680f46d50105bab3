"""Element-wise arithmetic and math: each op states its derivative in its docstring. The ops that are one formula
each way (exp, log, sqrt, ...) are rows of ``ops.table``; the others are classes.

``g`` is the gradient of the output; a backward returns one gradient per input (None where none is wanted).
Broadcast inputs get a gradient of the output's shape: the engine sums it back.
"""

from __future__ import annotations

from ..backend import FLOAT32_NP, get_default_dtype, kind_of, result_type, weak_number, xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual, kernels, no_gradient
from .clamp import Clamp, ClampMax, ClampMaxTensor, ClampMin, ClampMinTensor, ClampTensor, Maximum, Minimum
from .division import DivRounding, NotDifferentiable, Remainder, RemainderTensor
from .operands import checked_alpha, operand, tensors_only
from .power import BOOL_SUB_MESSAGE, Pow, PowTensor, RPow
from .table import cast, elementwise

__all__ = [
    "abs",
    "absolute",
    "add",
    "all",
    "allclose",
    "any",
    "clamp",
    "clamp_max",
    "clamp_min",
    "clip",
    "div",
    "divide",
    "eq",
    "equal",
    "exp",
    "floor_divide",
    "ge",
    "gt",
    "isfinite",
    "isnan",
    "le",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "lt",
    "maximum",
    "minimum",
    "mul",
    "multiply",
    "ne",
    "neg",
    "negative",
    "pow",
    "reciprocal",
    "remainder",
    "rsub",
    "sign",
    "sqrt",
    "sub",
    "subtract",
    "true_divide",
    "where",
]

# The functions without a gradient are math's names as well (PyTorch's torch.eq, torch.all, ...).
eq, ne, lt, le, gt, ge = no_gradient.eq, no_gradient.ne, no_gradient.lt, no_gradient.le, no_gradient.gt, no_gradient.ge
logical_and, logical_or, logical_xor, logical_not = (
    no_gradient.logical_and,
    no_gradient.logical_or,
    no_gradient.logical_xor,
    no_gradient.logical_not,
)
all, any, isnan, isfinite, allclose, equal = (
    no_gradient.all,
    no_gradient.any,
    no_gradient.isnan,
    no_gradient.isfinite,
    no_gradient.allclose,
    no_gradient.equal,
)
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne

_NUMBERS = (bool, int, float)
_INT_OR_FLOAT = (int, float)


def promote(a, b, true_divide: bool = False):
    """Cast tensor operands to the dtype PyTorch's promotion gives ``a (op) b``; numbers stay numbers."""
    # The common cases first: a floating tensor with a tensor of its own dtype, or with a Python int or float, keeps
    # its dtype (checked here without the general rules, which cost more than many small ops themselves).
    if isinstance(a, Tensor):
        dtype = a._data.dtype
        if type(b) in _INT_OR_FLOAT or isinstance(b, Tensor) and b._data.dtype is dtype:
            if dtype is FLOAT32_NP:  # no number to make bfloat16: float32 decided by one identity test
                return a, b
            if kind_of(dtype) == "f":
                return a, weak_number(b, dtype)
    elif type(a) in _INT_OR_FLOAT and isinstance(b, Tensor):
        dtype = b._data.dtype
        if dtype is FLOAT32_NP:
            return a, b
        if kind_of(dtype) == "f":
            return weak_number(a, dtype), b
    a, b = operand(a), operand(b)
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    da = a._data if ta else a
    db = b._data if tb else b
    if ta and tb and da.dtype is db.dtype:
        target = da.dtype
    else:
        target = result_type(da, db)
    if true_divide and kind_of(target) != "f":
        target = get_default_dtype().np
    if ta and da.dtype != target:
        a = cast(a, target)
    if tb and db.dtype != target:
        b = cast(b, target)
    return a, b


def binary(cls, a, b, true_divide: bool = False) -> Tensor:
    a, b = promote(a, b, true_divide)
    return cls.apply(a, b)


# ------------------------------------------------------------------------------------------------ table rows
Add, _ = elementwise("add", "AddBackward0", "", "x + y", "g, g", inputs="x, y")
RsubTensor, _ = elementwise("rsub", "RsubBackward0", "", "y - x", "-g, g", inputs="x, y")
Reciprocal, reciprocal = elementwise(
    "reciprocal", "ReciprocalBackward0", "out", "1 / x", "-g * out * out", "1 / x element-wise (integers give floats)."
)
Neg, neg = elementwise(
    "neg",
    "NegBackward0",
    "",
    "negative(x)",
    "-g",
    "-x element-wise (bool tensors are an error, as in PyTorch).",
    floating=False,
)
Exp, exp = elementwise(
    "exp", "ExpBackward0", "out", "xp.exp(x)", "g * out", "e^x element-wise (integers give the default float dtype)."
)
Log, log = elementwise(
    "log",
    "LogBackward0",
    "x",
    "xp.log(x)",
    "g / x",
    "The natural logarithm element-wise (integers give the default float dtype).",
)
Sqrt, sqrt = elementwise(
    "sqrt",
    "SqrtBackward0",
    "out",
    "xp.sqrt(x)",
    "g / (2 * out)",
    "The square root element-wise (integers give the default float dtype).",
)
Abs, abs = elementwise(
    "abs",
    "AbsBackward0",
    "x",
    "absolute(x)",
    "g * sign(data(x))",
    "|x| element-wise (not defined for bool tensors, as in PyTorch).",
    floating=False,
)
Sign, sign = elementwise(
    "sign",
    "SignBackward0",
    "",
    "sign(x)",
    "zeros_grad(g)",
    "-1, 0 or 1 by the sign of each element (0 for NaN; bool stays bool); the gradient is zero.",
    floating=False,
)


class Sub(Op, name="SubBackward0"):
    """out = x - y.   dx = g,  dy = -g."""

    def forward(self, x, y):
        try:
            return x - y
        except TypeError:  # NumPy refuses bool - bool
            raise RuntimeError(BOOL_SUB_MESSAGE) from None

    def backward(self, g):
        return g, -g if self.next_functions[1][0] is not None else None


class Rsub(Op, name="RsubBackward1"):
    """out = other - x for a number other.   dx = -g."""

    def forward(self, x, other):
        return other - x

    def backward(self, g):
        return -g


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
    """out = x / y.   dx = g / y,  dy = -g * (x / y) / y."""

    save_inputs = (0, 1)
    save_only_for = {0: 1}

    def forward(self, x, y):
        return x / y

    def backward(self, g):
        x, y = self.saved_tensors
        gx = g / y if self.next_functions[0][0] is not None else None
        # (x / y) / y in this order, as PyTorch: it overflows (and underflows) where PyTorch's does
        gy = -g * (x / y / y) if self.next_functions[1][0] is not None else None
        return gx, gy


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


# --------------------------------------------------------------------------------------------------- functions
class AddScaled(Op, name="AddBackward0"):
    """out = x + alpha y (one node, as PyTorch records ``add(x, y, alpha=a)``).   dx = g,  dy = alpha g."""

    def forward(self, x, y, alpha):
        self.alpha = alpha
        return x + y * alpha

    def backward(self, g):
        return g, g * self.alpha if self.next_functions[1][0] is not None else None


class SubScaled(AddScaled, name="SubBackward0"):
    """out = x - alpha y.   dx = g,  dy = -alpha g."""

    def forward(self, x, y, alpha):
        return super().forward(x, y, -alpha)


def _with_alpha(cls, input, other, alpha) -> Tensor | None:
    """``cls`` (AddScaled, SubScaled) on two tensors of one floating dtype, or None for the general path."""
    if (
        isinstance(input, Tensor)
        and isinstance(other, Tensor)
        and input._data.dtype is other._data.dtype
        and (input._data.dtype is FLOAT32_NP or kind_of(input._data.dtype) == "f")
        and type(alpha) in (int, float)
    ):
        return cls.apply(input, other, alpha=alpha)
    return None


def add(input, other, *, alpha=1) -> Tensor:
    """``input + alpha * other``.

    >>> import trainkit
    >>> trainkit.add(trainkit.ones(2), trainkit.ones(2), alpha=2)
    tensor([3., 3.])
    """
    if alpha != 1 or type(alpha) is not int:
        alpha = checked_alpha(input, other, alpha)
        scaled = _with_alpha(AddScaled, input, other, alpha) if alpha != 1 else None
        if scaled is not None:
            return scaled
        other = other if alpha == 1 else _scaled(other, alpha)
    elif isinstance(input, Tensor) and isinstance(other, Tensor) and input._data.dtype is other._data.dtype:
        return Add.apply(input, other)  # the common case, without the promotion step
    return binary(Add, input, other)


def _scaled(v, alpha):
    """``alpha * v``: a number stays a number, so that it keeps its weak dtype."""
    return v * alpha if isinstance(v, _NUMBERS) else mul(v, alpha)


def sub(input, other, *, alpha=1) -> Tensor:
    """``input - alpha * other`` (bool operands are an error, as in PyTorch)."""
    if alpha != 1 or type(alpha) is not int:
        alpha = checked_alpha(input, other, alpha)
        scaled = _with_alpha(SubScaled, input, other, alpha) if alpha != 1 else None
        if scaled is not None:
            return scaled
        other = other if alpha == 1 else _scaled(other, alpha)
    elif isinstance(input, Tensor) and isinstance(other, Tensor) and input._data.dtype is other._data.dtype:
        return Sub.apply(input, other)  # as in add
    _no_bool_sub(input, other)
    return binary(Sub, input, other)


def _no_bool_sub(a, b) -> None:
    for v in (a, b):
        if type(v) is bool or isinstance(v, Tensor) and v._data.dtype.kind == "b":
            raise RuntimeError(BOOL_SUB_MESSAGE)


def rsub(input, other, *, alpha=1) -> Tensor:
    """``other - alpha * input``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"rsub(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if alpha != 1 or type(alpha) is not int:
        alpha = checked_alpha(input, other, alpha)
        input = input if alpha == 1 else _scaled(input, alpha)
    _no_bool_sub(input, other)
    if isinstance(other, _NUMBERS):
        x, other = promote(input, other)
        return Rsub.apply(x, other=other)
    return binary(RsubTensor, input, other)


def mul(input, other) -> Tensor:
    """``input * other``, broadcasting as NumPy does."""
    if isinstance(input, Tensor) and isinstance(other, Tensor) and input._data.dtype is other._data.dtype:
        return Mul.apply(input, other)  # as in add
    return binary(Mul, input, other)


class DivMode(Div, name="DivBackward2"):
    """``div(x, y, rounding_mode=None)``: true division through PyTorch's overload with a rounding mode, which
    names its node apart from the plain ``x / y``.   dx = g / y,  dy = -g * (x / y) / y."""


class _NotGiven:
    """The default of ``rounding_mode``: PyTorch records ``rounding_mode=None`` given explicitly as another node."""

    def __repr__(self) -> str:
        return "None"


ROUNDING_NOT_GIVEN = _NotGiven()


def div(input, other, *, rounding_mode: str | None = ROUNDING_NOT_GIVEN) -> Tensor:
    """True division (integers give floats); ``rounding_mode='floor'|'trunc'`` rounds, with a zero gradient.

    >>> import trainkit
    >>> x = trainkit.tensor([3.0], requires_grad=True)
    >>> div(x, 2).grad_fn.name(), div(x, 2, rounding_mode=None).grad_fn.name()
    ('DivBackward0', 'DivBackward2')
    """
    if rounding_mode is None or rounding_mode is ROUNDING_NOT_GIVEN:
        a, b = promote(input, other, true_divide=True)
        if not isinstance(a, Tensor) and isinstance(b, Tensor):  # PyTorch wraps the number as a 0-d tensor
            a = Tensor._make(xp_of(b._data).asarray(a, dtype=b._data.dtype))
        return (Div if rounding_mode is ROUNDING_NOT_GIVEN else DivMode).apply(a, b)
    if rounding_mode not in ("floor", "trunc"):
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )
    a, b = promote(input, other)
    if not isinstance(a, Tensor):
        a = Tensor._make(xp_of(b._data).asarray(a, dtype=b._data.dtype))
    return DivRounding.apply(a, b, mode=rounding_mode)


true_divide = divide = div


def rtruediv(input, other) -> Tensor:
    """``other / input`` for the ``/`` operator with a number on the left: as PyTorch, ``reciprocal(input) * other``.

    >>> import trainkit
    >>> 2 / trainkit.tensor([4.0])
    tensor([0.5000])
    """
    return mul(reciprocal(input), other)


multiply = mul
subtract = sub


negative = neg


def pow(input, exponent) -> Tensor:
    """``input ** exponent`` for tensors or numbers on either side; integers to a negative number are an error."""
    if not isinstance(input, Tensor):
        if not isinstance(exponent, Tensor):
            raise TypeError(
                f"pow() received an invalid combination of arguments - got ({type(input).__name__}, "
                f"{type(exponent).__name__})"
            )
        base, exponent = promote(input, exponent)
        return RPow.apply(exponent, base=base)
    if isinstance(exponent, Tensor):
        bool_exponent = exponent._data.dtype.kind == "b"
        return PowTensor.apply(*promote(input, exponent), bool_exponent=bool_exponent)
    input, exponent = promote(input, operand(exponent))
    if kind_of(input._data.dtype) != "f" and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return Pow.apply(input, p=exponent)


absolute = abs


def clamp(input, min=None, max=None) -> Tensor:
    """Limit values to ``[min, max]``; either bound may be None, and both are numbers or both tensors."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if not all_tensors_or_none(min, max):
            raise TypeError(
                f"clamp() received an invalid combination of arguments - got (Tensor, "
                f"{type(min).__name__}, {type(max).__name__})"
            )
        return _clamp_tensor(ClampTensor, input, min, max)
    for bound in (min, max):
        if bound is not None:
            input, _ = promote(input, bound)
    return Clamp.apply(input, lo=min, hi=max)


clip = clamp


def all_tensors_or_none(*values) -> bool:
    """True when each value is a Tensor or None (clamp's tensor overload)."""
    return not [v for v in values if v is not None and not isinstance(v, Tensor)]


def clamp_tensor_operands(input, min, max) -> tuple:
    """``input``, ``min`` and ``max`` cast to their common dtype (None bounds stay None)."""
    for _ in range(2):  # twice, so that a bound's wider dtype reaches the other bound too
        if min is not None:
            input, min = promote(input, min)
        if max is not None:
            input, max = promote(input, max)
    return input, min, max


def _clamp_tensor(cls, input, min, max) -> Tensor:
    return cls.apply(*clamp_tensor_operands(input, min, max))


def clamp_min(input, min) -> Tensor:
    """max(x, min) element-wise."""
    if isinstance(min, Tensor):
        return _clamp_tensor(ClampMinTensor, input, min, None)
    input, _ = promote(input, min)
    return ClampMin.apply(input, lo=min, hi=None)


def clamp_max(input, max) -> Tensor:
    """min(x, max) element-wise."""
    if isinstance(max, Tensor):
        return _clamp_tensor(ClampMaxTensor, input, None, max)
    input, _ = promote(input, max)
    return ClampMax.apply(input, lo=None, hi=max)


def where(condition, input=None, other=None) -> Tensor:
    """Elements of ``input`` where ``condition`` holds, else of ``other`` (numbers allowed on either side)."""
    if input is None and other is None:
        data = condition._data.reshape(1) if condition._data.ndim == 0 else condition._data  # a 0-d one: as 1-d
        return tuple(Tensor._make(i.astype("int64", copy=False)) for i in xp_of(data).nonzero(data))
    if not isinstance(condition, Tensor) or condition._data.dtype.kind != "b":
        raise RuntimeError("where expected condition to be a boolean tensor")
    x, y = promote(input, other)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):  # two numbers: the dtype PyTorch gives them
        x = Tensor._make(xp_of(condition._data).asarray(x, dtype=result_type(x, y)))
    return Where.apply(x, y, cond=condition._data)


def maximum(input, other) -> Tensor:
    """The larger of two tensors element-wise (NaN wins); numbers are a TypeError, as in PyTorch."""
    tensors_only("maximum", input, other)
    return binary(Maximum, input, other)


def minimum(input, other) -> Tensor:
    """The smaller of two tensors element-wise (NaN wins); numbers are a TypeError, as in PyTorch."""
    tensors_only("minimum", input, other)
    return binary(Minimum, input, other)


def floor_divide(input, other) -> Tensor:
    """``input // other`` rounded toward minus infinity; PyTorch defines no derivative (backward is an error)."""
    a, b = promote(input, other)
    if not isinstance(a, Tensor):
        a = Tensor._make(xp_of(b._data).asarray(a, dtype=b._data.dtype))
    return NotDifferentiable.apply(a, b, fn=_floor, aten="floor_divide")


def _floor(a, b):
    return kernels.rounded_divide(a, b, "floor")


def remainder(input, other) -> Tensor:
    """Python-style remainder (the sign of the divisor), with PyTorch's signed zeros.  d input = g,
    d other = -g * floor(input / other); a number divided by a tensor has no derivative, as in PyTorch."""
    a, b = promote(input, other)
    if not isinstance(a, Tensor):
        a = Tensor._make(xp_of(b._data).asarray(a, dtype=b._data.dtype))
        return NotDifferentiable.apply(a, b, fn=kernels.remainder, aten="remainder")
    if isinstance(b, Tensor):
        return RemainderTensor.apply(a, b)
    return Remainder.apply(a, other=b)
