"""Trigonometric and hyperbolic functions: sin, cos, tan, their inverses, sinh, cosh (rows of ``ops.table``) and
atan2. Each op states its derivative in its docstring; a backward works on arrays and on Tensors alike
(``create_graph``).
"""

from __future__ import annotations

from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual, kernels
from . import math as _m
from .operands import tensors_only
from .table import elementwise

__all__ = ["acos", "asin", "atan", "atan2", "cos", "cosh", "sin", "sinh", "tan"]

_SIN_DOC = """sin x element-wise.

    >>> import trainkit
    >>> from trainkit.autograd.ops.trigonometric import sin
    >>> sin(trainkit.zeros(2))
    tensor([0., 0.])
    """


# ------------------------------------------------------------------------------------------------ table rows
Sin, sin = elementwise("sin", "SinBackward0", "x", "xp.sin(x)", "g * cos(x)", _SIN_DOC)
Cos, cos = elementwise("cos", "CosBackward0", "x", "xp.cos(x)", "-g * sin(x)", "cos x element-wise.")
Tan, tan = elementwise("tan", "TanBackward0", "out", "xp.tan(x)", "g * (1 + out * out)", "tan x element-wise.")
Asin, asin = elementwise(
    "asin",
    "AsinBackward0",
    "x",
    "xp.arcsin(x)",
    "g / sqrt(1 - x * x)",
    "The inverse sine element-wise, in [-pi/2, pi/2] (NaN outside [-1, 1]).",
)
Acos, acos = elementwise(
    "acos",
    "AcosBackward0",
    "x",
    "xp.arccos(x)",
    "-g / sqrt(1 - x * x)",
    "The inverse cosine element-wise, in [0, pi] (NaN outside [-1, 1]).",
)
Atan, atan = elementwise(
    "atan",
    "AtanBackward0",
    "x",
    "xp.arctan(x)",
    "g / (1 + x * x)",
    "The inverse tangent element-wise, in (-pi/2, pi/2).",
)
Sinh, sinh = elementwise("sinh", "SinhBackward0", "x", "xp.sinh(x)", "g * cosh(x)", "sinh x element-wise.")
Cosh, cosh = elementwise("cosh", "CoshBackward0", "x", "xp.cosh(x)", "g * sinh(x)", "cosh x element-wise.")


class Atan2(Op, name="Atan2Backward0"):
    """out = atan2(y, x).   dy = g * x * r,  dx = g * -y * r  with r = 1 / (x^2 + y^2), taken as 0 where infinite."""

    save_inputs = (0, 1)

    def forward(self, y, x):
        return xp_of(y).arctan2(y, x)

    def backward(self, g):
        y, x = self.saved_tensors
        squares = x * x + y * y
        with kernels.quiet(xp_of(dual.data(squares))):
            infinite = xp_of(dual.data(squares)).isinf(1 / dual.data(squares))
        # PyTorch zeroes an infinite 1 / (x^2 + y^2) (the origin gets a zero gradient) and multiplies in the order
        # g * x * r, so that g * x may overflow to inf and give NaN where r is 0, as there
        recip = dual.where(infinite, 0, 1 / dual.where(infinite, 1, squares)) if infinite.any() else 1 / squares
        (fy, _), (fx, _) = self.next_functions
        return (g * x * recip if fy is not None else None, g * -y * recip if fx is not None else None)


def atan2(input, other) -> Tensor:
    """The angle of the point (other, input): atan(input / other) in the right quadrant (tensors only)."""
    tensors_only("atan2", input, other)
    return _m.binary(Atan2, input, other, true_divide=True)
