"""Running sums and products along a dimension, and products: cumsum, cumprod and prod.

The products' gradients are exact where the input has zeros: they are computed from the products of the other
elements, never by dividing the output.
"""

from __future__ import annotations

import numpy as np

from ..backend import to_dtype, xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual
from .rearrange import flip_grads
from .shape import cat_grads

__all__ = ["cumprod", "cumsum", "prod"]


def _cumsum(v, axis: int):
    if isinstance(v, Tensor):
        return Cumsum.apply(v, dim=axis, dtype=None)
    return xp_of(v).cumsum(v, axis=axis)


def _cumprod(v, axis: int):
    if isinstance(v, Tensor):
        return Cumprod.apply(v, dim=axis)
    return xp_of(v).cumprod(v, axis=axis)


def _ones_like(v):
    d = dual.data(v)
    return xp_of(d).ones(d.shape, dtype=d.dtype)


def _shift(v, axis: int, reverse: bool):
    """``v`` moved one step along ``axis`` with a one entering: the exclusive running product's input."""
    n = v.shape[axis]
    lead = (slice(None),) * axis
    ones = _ones_like(v)[lead + (slice(0, 1),)]
    if isinstance(v, Tensor):
        ones = Tensor._make(ones)
    if reverse:
        return cat_grads([v[lead + (slice(1, n),)], ones], axis)
    return cat_grads([ones, v[lead + (slice(0, n - 1),)]], axis)


def _prod_others(x, axis: int):
    """For each element, the product of the others along ``axis`` (no division: exact with zeros)."""
    left = _cumprod(_shift(x, axis, False), axis)
    right = flip_grads(_cumprod(flip_grads(_shift(x, axis, True), (axis,)), axis), (axis,))
    return left * right


class Cumsum(Op, name="CumsumBackward0"):
    """out_i = x_0 + ... + x_i along ``dim``.   dx_i = g_i + ... + g_last (a reversed running sum)."""

    def forward(self, x, dim, dtype):
        self.dim = dim
        if x.ndim == 0:
            return x.astype(dtype) if dtype is not None else x.copy()
        return xp_of(x).cumsum(x, axis=dim, dtype=dtype)

    def backward(self, g):
        if g.ndim == 0:
            return g
        return flip_grads(_cumsum(flip_grads(g, (self.dim,)), self.dim), (self.dim,))


def _int_to_long(input: Tensor, dtype):
    if dtype is not None:
        return to_dtype(dtype).np
    return np.int64 if input._data.dtype.kind in "biu" else None


def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running sums along ``dim``; integers and bools sum to int64."""
    np_dtype = _int_to_long(input, dtype)
    return Cumsum.apply(input, dim=input._dim(dim), dtype=np_dtype)


class Cumprod(Op, name="CumprodBackward0"):
    """out_i = x_0 * ... * x_i along ``dim``.

    dx_i = sum_{j >= i} g_j prod_{k <= j, k != i} x_k: with no zero in x this is (reversed running sum of g out)_i
    / x_i; with zeros it is computed from the products that leave x_i out, one row per i.
    """

    save_inputs = (0,)
    save_output = True

    def forward(self, x, dim):
        self.dim = dim
        if x.ndim == 0:
            return x.copy()
        return xp_of(x).cumprod(x, axis=dim)

    def backward(self, g):
        x, out = self.saved_tensors
        if g.ndim == 0:
            return g
        d = self.dim
        xd = dual.data(x)
        if not isinstance(g, Tensor) and xd.size and bool((xd != 0).all()):
            return flip_grads(_cumsum(flip_grads(g * out, (d,)), d), (d,)) / x
        n = xd.shape[d]
        nd = xd.ndim
        order = tuple(a for a in range(nd) if a != d) + (d,)
        back = tuple(int(i) for i in np.argsort(order))
        xm = dual.permute(x, order)
        gm = dual.permute(g, order)
        lead = tuple(xm.shape[:-1])
        xp = xp_of(xd)
        eye = xp.eye(n, dtype=bool)
        rows = dual.where(eye, 1.0, xm.reshape(lead + (1, n)))  # rows[..., i, k]: x_k with x_i set to 1
        rows = _cumprod(dual.broadcast_to(rows, lead + (n, n)) * 1, nd)
        upper = xp.triu(xp.ones((n, n), dtype=xd.dtype))  # j >= i
        dx = (rows * gm.reshape(lead + (1, n)) * upper).sum(axis=nd)
        return dual.permute(dx, back)


def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running products along ``dim``; integers and bools multiply to int64."""
    np_dtype = _int_to_long(input, dtype)
    if np_dtype is not None and input._data.dtype != np_dtype:
        input = input.to(to_dtype(np_dtype) if dtype is None else dtype)
    return Cumprod.apply(input, dim=input._dim(dim))


class ProdAll(Op, name="ProdBackward0"):
    """out = the product of all of x.   dx_i = g * (product of the others), exact where x has zeros."""

    save_inputs = (0,)

    def forward(self, x, dim, keepdim):
        self.dim, self.keepdim, self.in_shape = dim, keepdim, x.shape
        return x.prod(axis=dim, keepdims=keepdim)

    def backward(self, g):
        (x,) = self.saved_tensors
        if not self.in_shape:
            return g
        xd = dual.data(x)
        if not isinstance(g, Tensor) and bool((xd != 0).all()):  # no zero: out / x, as PyTorch (nan at an inf)
            out = xd.prod(axis=self.dim, keepdims=True)
            axes = None if self.dim is None else (self.dim,)
            with np.errstate(invalid="ignore", divide="ignore"):
                return dual.keep_dims(g, self.in_shape, axes, self.keepdim) * (out / xd)
        if self.dim is None:
            others = _prod_others(x.reshape(-1), 0).reshape(self.in_shape) if len(self.in_shape) else _ones_like(x)
        else:
            others = _prod_others(x, self.dim)
        axes = None if self.dim is None else (self.dim,)
        return dual.keep_dims(g, self.in_shape, axes, self.keepdim) * others


class ProdDim(ProdAll, name="ProdBackward1"):
    pass


def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, **kwargs) -> Tensor:
    """The product of all elements, or along ``dim``; integers and bools multiply to int64."""
    if "axis" in kwargs:  # PyTorch's alias for dim
        dim = kwargs.pop("axis")
    if "keepdims" in kwargs:
        keepdim = kwargs.pop("keepdims")
    if kwargs:
        raise TypeError(f"prod() got an unexpected keyword argument '{next(iter(kwargs))}'")
    np_dtype = _int_to_long(input, dtype)
    if np_dtype is not None and input._data.dtype != np_dtype:
        input = input.to(to_dtype(np_dtype) if dtype is None else dtype)
    if dim is None:
        return ProdAll.apply(input, dim=None, keepdim=False)
    if input._data.ndim == 0:
        input._dim(dim)
        return ProdDim.apply(input, dim=None, keepdim=False)
    return ProdDim.apply(input, dim=input._dim(dim), keepdim=bool(keepdim))
