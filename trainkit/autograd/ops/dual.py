"""Functions that backward formulas call, working on arrays (plain backward) and on Tensors (create_graph).

Operators (``*``, ``/``, ``@``, ``-``) and the methods ``reshape``, ``sum(axis, keepdims)`` and ``swapaxes`` already
mean the same on both. What they do not share is here; each costs one type check on the plain path. On Tensors
these call Tensor methods, so this module needs no op module (the ops import it). The gradient forms of joining and
of indexing into zeros live beside their ops, in ``ops.shape``.
"""

from __future__ import annotations

import numpy as np

from ..backend import kind_of, xp_of
from ..tensor import Tensor

__all__ = [
    "broadcast_to",
    "cos",
    "cosh",
    "data",
    "exp",
    "keep",
    "keep_dims",
    "log",
    "one_minus",
    "permute",
    "sin",
    "sinh",
    "sqrt",
    "where",
    "zeros_grad",
]


def data(v):
    """The array behind ``v``: for masks and other values a backward uses as constants."""
    return v._data if isinstance(v, Tensor) else v


_ONES: dict = {}  # dtype -> a 0-d one of that dtype, for one_minus


def one_minus(v):
    """``1 - v``. On a floating NumPy array it subtracts from a 0-d one of the array's dtype: the same bits, in half
    the time of converting the Python 1 on every call (which dominates for small arrays)."""
    if type(v) is not np.ndarray:
        return 1 - v
    dt = v.dtype
    one = _ONES.get(dt)
    if one is None:
        if kind_of(dt) not in "fc":  # 1 - an integer or bool array follows the promotion rules of a Python int
            return 1 - v
        one = _ONES[dt] = np.ones((), dt)
    return one - v


def exp(v):
    return v.exp() if isinstance(v, Tensor) else xp_of(v).exp(v)


def log(v):
    return v.log() if isinstance(v, Tensor) else xp_of(v).log(v)


def sqrt(v):
    return v.sqrt() if isinstance(v, Tensor) else xp_of(v).sqrt(v)


def sin(v):
    return v.sin() if isinstance(v, Tensor) else xp_of(v).sin(v)


def cos(v):
    return v.cos() if isinstance(v, Tensor) else xp_of(v).cos(v)


def sinh(v):
    return v.sinh() if isinstance(v, Tensor) else xp_of(v).sinh(v)


def cosh(v):
    return v.cosh() if isinstance(v, Tensor) else xp_of(v).cosh(v)


def zeros_grad(g):
    """The zero gradient of a step function: zeros even where ``g`` is infinite or NaN (PyTorch's zeros_like)."""
    return g * 0 if isinstance(g, Tensor) else xp_of(g).zeros_like(g)


def broadcast_to(v, shape: tuple):
    if isinstance(v, Tensor):
        return v.expand(*shape)
    return xp_of(v).broadcast_to(v, shape)


def permute(v, axes: tuple):
    if isinstance(v, Tensor):
        return v.permute(*axes)
    return v.transpose(axes)


def where(cond, a, b):
    """``cond`` is a constant boolean array; ``a`` and ``b`` may be arrays, Tensors or numbers."""
    if isinstance(a, Tensor):
        return a.where(Tensor._make(cond), b)
    if isinstance(b, Tensor):  # where(cond, a, b) is where(~cond, b, a)
        return b.where(Tensor._make(~cond), a)
    return xp_of(cond).where(cond, a, b)


def keep(g, mask):
    """``g`` where ``mask`` holds, else 0 (the backward of ReLU, clamp, where, max).

    On NumPy a multiply is about ten times faster than ``where`` on an irregular mask; it differs only where a
    dropped gradient is inf or nan (``inf * 0`` is nan), so that case, and only it, falls back to ``where``.
    """
    if isinstance(g, Tensor) or xp_of(g) is not np:
        return where(mask, g, 0)
    with np.errstate(invalid="ignore"):
        out = g * mask
    if np.isfinite(out).all():
        return out
    return np.where(mask, g, 0)


def keep_dims(g, in_shape: tuple, axes: tuple | None, keepdim: bool):
    """A reduction's output gradient reshaped so that it broadcasts against the reduced input."""
    if keepdim or axes is None and g.ndim == len(in_shape):
        return g
    if axes is None:
        return g.reshape((1,) * len(in_shape))
    kept = tuple(1 if i in axes else n for i, n in enumerate(in_shape))
    return g.reshape(kept)
