"""The ops of rounded division and remainder, and the node of an op PyTorch records without a derivative."""

from __future__ import annotations

from ..function import Op
from . import dual
from .kernels import remainder, rounded_divide

__all__ = ["DivRounding", "NotDifferentiable", "Remainder", "RemainderTensor"]


class DivRounding(Op, name="DivBackward2"):
    """out = x / y rounded toward minus infinity or zero.   dx = 0,  dy = 0 (a step function)."""

    def forward(self, x, y, mode):
        return rounded_divide(x, y, mode)

    def backward(self, g):
        z = dual.zeros_grad(g)
        return z, z


class NotDifferentiable(Op, name="NotImplemented"):
    """An op PyTorch records without a derivative (floor_divide, remainder of a number by a tensor): the output
    requires grad, and backward through it is an error."""

    def forward(self, x, y, fn, aten):
        self.aten = aten
        return fn(x, y)

    def name(self) -> str:
        return "torch::autograd::NotImplemented"

    def backward(self, g):
        raise RuntimeError(f"derivative for aten::{self.aten} is not implemented")


class Remainder(Op, name="RemainderBackward0"):
    """out = x mod c for a number c (the sign of c).   dx = g."""

    def forward(self, x, other):
        return remainder(x, other)

    def backward(self, g):
        return g


class RemainderTensor(Op, name="RemainderBackward1"):
    """out = x mod y = x - floor(x / y) y.   dx = g,  dy = -g * floor(x / y)."""

    save_inputs = (0, 1)
    save_only_for = {0: 1, 1: 1}

    def forward(self, x, y):
        return remainder(x, y)

    def backward(self, g):
        gy = None
        if self.next_functions[1][0] is not None:
            x, y = (dual.data(v) for v in self.saved_tensors)
            gy = -g * rounded_divide(x, y, "floor")
        return (g if self.next_functions[0][0] is not None else None), gy
