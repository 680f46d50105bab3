"""The nodes of powers: a tensor to a number, a tensor to a tensor, a number to a tensor."""

from __future__ import annotations

import math as _math

from ..backend import xp_of
from ..function import Op
from . import dual, kernels
from .kernels import not_implemented

__all__ = ["BOOL_SUB_MESSAGE", "Pow", "PowTensor", "RPow"]

BOOL_SUB_MESSAGE = (
    "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
    "use the `~` or `logical_not()` operator instead."
)


class Pow(Op, name="PowBackward0"):
    """out = x ** p for a number p.   dx = g * p * x^(p-1)."""

    save_inputs = (0,)

    def forward(self, x, p):
        self.p = p
        if p == -0.5:  # as PyTorch: 1 / sqrt(x), so that -0.0 gives -inf
            return 1 / xp_of(x).sqrt(x)
        if x.dtype.kind == "b":  # a bool tensor to a bool power stays bool
            return x | (not p)
        return x**p

    def backward(self, g):
        (x,) = self.saved_tensors
        p = self.p
        if p == 0:
            return dual.zeros_grad(g)
        return g * (p * x ** (p - 1))


class PowTensor(Op, name="PowBackward1"):
    """out = x ** y.   dx = g * (y * x^(y-1))  (0 where y = 0),  dy = g * (out * log(x))  (0 where x = 0 and
    y >= 0); the products are grouped as PyTorch groups them, which decides where a gradient overflows."""

    save_inputs = (0, 1)
    save_output = True

    def forward(self, x, y, bool_exponent=False):
        self.bool_exponent = bool_exponent
        if x.dtype.kind in "iu":
            return kernels.int_power(x, y)
        if x.dtype.kind == "b":
            raise not_implemented("pow", x.dtype)
        return x**y

    def backward(self, g):
        x, y, out = self.saved_tensors
        xd, yd = dual.data(x), dual.data(y)
        gx = None
        if self.next_functions[0][0] is not None:
            if self.bool_exponent:  # PyTorch's formula takes y - 1 of the bool exponent itself
                raise RuntimeError(BOOL_SUB_MESSAGE)
            gx = dual.where(yd == 0, 0, g * (y * x ** (y - 1)))
        gy = None
        if self.next_functions[1][0] is not None:
            zero = (xd == 0) & (yd >= 0)
            gy = g * dual.where(zero, 0, out * dual.log(dual.where(zero, 1, x)))
        return gx, gy


class RPow(Op, name="PowBackward2"):
    """out = b ** x for a number b.   dx = g * (out * log(b))  (NaN for b < 0; for b = 0, 0 where x >= 0)."""

    save_inputs = (0,)
    save_only_for = {0: 0}
    save_output = True

    def forward(self, x, base):
        self.base = base
        if x.dtype.kind in "iu":
            return kernels.int_power(xp_of(x).asarray(base, dtype=x.dtype), x)
        if x.dtype.kind == "b":
            raise not_implemented("pow", x.dtype)
        return base**x

    def backward(self, g):
        x, out = self.saved_tensors
        base = self.base
        if isinstance(base, bool):
            # PyTorch's backward cannot read a bool base back as a number and fails (an internal assert)
            raise RuntimeError(
                f"pow backward: a bool base ({base}) raised to a tensor power has no derivative; "
                f"write {float(base)} ** x instead"
            )
        if base > 0:
            return g * (out * _math.log(base))
        if base < 0:
            return g * (out * _math.nan)
        return g * dual.where(dual.data(x) >= 0, 0, out * -_math.inf)
