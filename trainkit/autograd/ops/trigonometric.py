"""Trigonometric and hyperbolic functions: sin, cos, tan, their inverses, sinh, cosh and atan2. Each op states its
derivative in its docstring; a backward works on arrays and on Tensors alike (``create_graph``).
"""

from __future__ import annotations

from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual, special
from . import math as _m
from .elementwise import as_floating

__all__ = ["acos", "asin", "atan", "atan2", "cos", "cosh", "sin", "sinh", "tan"]


def _call(name: str, v):
    """``name(v)`` on an array (NumPy/CuPy) or on a Tensor (recorded, for ``create_graph``)."""
    if isinstance(v, Tensor):
        return _TENSOR_FNS[name](v)
    return getattr(xp_of(v), name)(v)


class Sin(Op, name="SinBackward0"):
    """out = sin x.   dx = g * cos x."""

    save_inputs = (0,)

    def forward(self, x):
        return xp_of(x).sin(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return g * _call("cos", x)


class Cos(Op, name="CosBackward0"):
    """out = cos x.   dx = -g * sin x."""

    save_inputs = (0,)

    def forward(self, x):
        return xp_of(x).cos(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return -g * _call("sin", x)


class Tan(Op, name="TanBackward0"):
    """out = tan x.   dx = g * (1 + out^2)."""

    save_output = True

    def forward(self, x):
        return xp_of(x).tan(x)

    def backward(self, g):
        (out,) = self.saved_tensors
        return g * (1 + out * out)


class Asin(Op, name="AsinBackward0"):
    """out = asin x.   dx = g / sqrt(1 - x^2)."""

    save_inputs = (0,)

    def forward(self, x):
        return xp_of(x).arcsin(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return g / _call("sqrt", 1 - x * x)


class Acos(Op, name="AcosBackward0"):
    """out = acos x.   dx = -g / sqrt(1 - x^2)."""

    save_inputs = (0,)

    def forward(self, x):
        return xp_of(x).arccos(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return -g / _call("sqrt", 1 - x * x)


class Atan(Op, name="AtanBackward0"):
    """out = atan x.   dx = g / (1 + x^2)."""

    save_inputs = (0,)

    def forward(self, x):
        return xp_of(x).arctan(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return g / (1 + x * x)


class Sinh(Op, name="SinhBackward0"):
    """out = sinh x.   dx = g * cosh x."""

    save_inputs = (0,)

    def forward(self, x):
        return xp_of(x).sinh(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return g * _call("cosh", x)


class Cosh(Op, name="CoshBackward0"):
    """out = cosh x.   dx = g * sinh x."""

    save_inputs = (0,)

    def forward(self, x):
        return xp_of(x).cosh(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return g * _call("sinh", x)


class Atan2(Op, name="Atan2Backward0"):
    """out = atan2(y, x).   dy = g * x * r,  dx = g * -y * r  with r = 1 / (x^2 + y^2), taken as 0 where infinite."""

    save_inputs = (0, 1)

    def forward(self, y, x):
        return xp_of(y).arctan2(y, x)

    def backward(self, g):
        y, x = self.saved_tensors
        squares = x * x + y * y
        with special.quiet(xp_of(dual.data(squares))):
            infinite = xp_of(dual.data(squares)).isinf(1 / dual.data(squares))
        # PyTorch zeroes an infinite 1 / (x^2 + y^2) (the origin gets a zero gradient) and multiplies in the order
        # g * x * r, so that g * x may overflow to inf and give NaN where r is 0, as there
        recip = dual.where(infinite, 0, 1 / dual.where(infinite, 1, squares)) if infinite.any() else 1 / squares
        (fy, _), (fx, _) = self.next_functions
        return (g * x * recip if fy is not None else None, g * -y * recip if fx is not None else None)


def sin(input) -> Tensor:
    """sin x element-wise.

    >>> import trainkit
    >>> from trainkit.autograd.ops.trigonometric import sin
    >>> sin(trainkit.zeros(2))
    tensor([0., 0.])
    """
    return Sin.apply(as_floating(input))


def cos(input) -> Tensor:
    return Cos.apply(as_floating(input))


def tan(input) -> Tensor:
    return Tan.apply(as_floating(input))


def asin(input) -> Tensor:
    return Asin.apply(as_floating(input))


def acos(input) -> Tensor:
    return Acos.apply(as_floating(input))


def atan(input) -> Tensor:
    return Atan.apply(as_floating(input))


def sinh(input) -> Tensor:
    return Sinh.apply(as_floating(input))


def cosh(input) -> Tensor:
    return Cosh.apply(as_floating(input))


def atan2(input, other) -> Tensor:
    """The angle of the point (other, input): atan(input / other) in the right quadrant (tensors only)."""
    special.tensors_only("atan2", input, other)
    return _m.binary(Atan2, input, other, true_divide=True)


_TENSOR_FNS = {"cos": cos, "sin": sin, "cosh": cosh, "sinh": sinh, "sqrt": _m.sqrt}
