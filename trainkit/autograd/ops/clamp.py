"""The ops whose gradients split at the bounds and at ties: clamp (number or tensor bounds), maximum and minimum."""

from __future__ import annotations

import numpy as np

from ..backend import bfloat16_result, kind_of, xp_of
from ..function import Op
from . import dual

__all__ = ["Clamp", "ClampMax", "ClampMaxTensor", "ClampMin", "ClampMinTensor", "ClampTensor", "Maximum", "Minimum"]


class Clamp(Op, name="ClampBackward1"):
    """out = min(max(x, lo), hi).   dx = g where lo <= x <= hi, else 0."""

    save_inputs = (0,)

    def forward(self, x, lo, hi):
        if x.dtype.kind == "b" and {type(b) for b in (lo, hi) if b is not None} == {bool}:  # no kernel in PyTorch
            which = "clamp" if lo is not None and hi is not None else ("clamp_max" if lo is None else "clamp_min")
            raise NotImplementedError(f"\"{which}_scalar_cpu\" not implemented for 'Bool'")
        self.lo, self.hi = lo, hi
        out = bfloat16_result(xp_of(x).clip(x, lo, hi), x)  # ml_dtypes clips bfloat16 in float32
        return _keep_zero_sign(x, out)

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


def _keep_zero_sign(x, out):
    """PyTorch's clamp keeps x where x equals a bound: -0.0 clamped below by 0.0 stays -0.0 (NumPy gives 0.0)."""
    if kind_of(x.dtype) != "f":
        return out
    return xp_of(x).where(out == x, x, out)


class ClampTensor(Op, name="ClampBackward0"):
    """out = min(max(x, lo), hi) for tensors lo, hi (either may be None).   dx = g where lo <= x <= hi,
    dlo = g where x < lo < hi,  dhi = g where x > hi or hi < lo (PyTorch's split when the bounds cross)."""

    save_inputs = (0, 1, 2)

    def forward(self, x, lo, hi):
        xp = xp_of(x)
        out = x if lo is None else xp.maximum(x, lo)
        out = out if hi is None else xp.minimum(out, hi)
        return _keep_zero_sign(x, out)

    def backward(self, g):
        x, lo, hi = (dual.data(v) for v in self.saved_tensors)
        if hi is None:
            return dual.keep(g, x >= lo), dual.keep(g, x < lo), None
        if lo is None:
            return dual.keep(g, x <= hi), None, dual.keep(g, x > hi)
        (fx, _), (flo, _), (fhi, _) = self.next_functions
        _check_in_place_shapes(x, lo, g.shape, fx is not None or flo is not None)
        _check_in_place_shapes(x, hi, g.shape, fhi is not None)
        return (
            dual.keep(g, (x >= lo) & (x <= hi)),
            dual.keep(g, (x < lo) & (lo < hi)),
            dual.keep(g, (x > hi) | (hi < lo)),
        )


def _check_in_place_shapes(x, bound, shape: tuple, wanted: bool) -> None:
    """PyTorch's clamp backward combines masks in place, starting from the mask of x and one bound: it fails
    where that mask is smaller than the output (the other bound broadcasts x further)."""
    first = np.broadcast_shapes(x.shape, bound.shape)
    if wanted and first != tuple(shape):
        raise RuntimeError(
            f"output with shape {list(first)} doesn't match the broadcast shape {list(shape)}: the "
            f"gradient of clamp needs x and each bound to broadcast to the output's shape; expand "
            f"them first"
        )


class ClampMinTensor(ClampTensor, name="ClampMinBackward1"):
    pass


class ClampMaxTensor(ClampTensor, name="ClampMaxBackward1"):
    pass


class Maximum(Op, name="MaximumBackward0"):
    """out = max(x, y).   dx = g where not x < y,  dy = g where not y < x; a tie gives each half (NaN: both g)."""

    save_inputs = (0, 1)

    def forward(self, x, y):
        return xp_of(x).maximum(x, y)

    def backward(self, g):
        x, y = (dual.data(v) for v in self.saved_tensors)
        return _split(g, x, y, x < y, x > y)


class Minimum(Op, name="MinimumBackward0"):
    """out = min(x, y).   dx = g where not x > y,  dy = g where not y > x; a tie gives each half (NaN: both g)."""

    save_inputs = (0, 1)

    def forward(self, x, y):
        return xp_of(x).minimum(x, y)

    def backward(self, g):
        x, y = (dual.data(v) for v in self.saved_tensors)
        return _split(g, x, y, x > y, x < y)


def _split(g, x, y, x_loses, y_loses):
    """PyTorch's gradients of max/min: g halved on ties, then dropped for the operand that lost."""
    tie = x == y
    if tie.any():
        g = g * (1 - 0.5 * tie.astype(dual.data(g).dtype))
    return dual.keep(g, ~x_loses), dual.keep(g, ~y_loses)
