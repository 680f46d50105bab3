"""Running sums and products along a dimension, and products: cumsum, cumprod and prod.

The products' gradients are exact where the input has zeros: they are computed from the products of the other
elements, never by dividing the output.
"""

from __future__ import annotations

import numpy as np

from ..autocast import autocast_inputs, enabled_threads
from ..backend import BFLOAT16_NP, dtype_of, to_dtype, xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual
from .rearrange import flip_grads
from .reduction import check_grad_dtype
from .shape import cat_grads

__all__ = ["cumprod", "cumsum", "prod"]


def _running(kind: str, x, axis: int, dtype=None):
    """cumsum or cumprod of an array into ``dtype`` (x's when None). Half and single precision run in double and
    are rounded at each step's output, as PyTorch's CPU kernels do: a partial result past float32's range does not
    stay inf when later elements bring it back."""
    target = np.dtype(x.dtype if dtype is None else dtype)
    acc = np.float64 if target in (np.float32, np.float16, BFLOAT16_NP) else target
    out = getattr(xp_of(x), kind)(x, axis=axis, dtype=acc)
    return out if out.dtype == target else out.astype(target)


def _cumsum(v, axis: int):
    if isinstance(v, Tensor):
        return Cumsum.apply(v, dim=axis, dtype=None)
    return _running("cumsum", v, axis)


def _cumprod(v, axis: int):
    if isinstance(v, Tensor):
        return Cumprod.apply(v, dim=axis, dtype=None)
    return _running("cumprod", v, axis)


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
        self.dim, self.in_dtype = dim, x.dtype
        if x.ndim == 0:
            return x.astype(dtype) if dtype is not None else x.copy()
        with np.errstate(over="ignore", invalid="ignore"):
            return _running("cumsum", x, dim, dtype)

    def backward(self, g):
        g = _in_dtype(g, self.in_dtype)
        if g.ndim == 0:
            return g
        return flip_grads(_cumsum(flip_grads(g, (self.dim,)), self.dim), (self.dim,))


def _in_dtype(g, dt):
    """``g`` cast to the input's dtype: PyTorch runs the backward of cumsum and cumprod with dtype= in it."""
    if dual.data(g).dtype == dt:
        return g
    return g.to(dtype_of(dt)) if isinstance(g, Tensor) else g.astype(dt)


def _int_to_long(input: Tensor, dtype):
    if dtype is not None:
        return to_dtype(dtype).np
    return np.int64 if input._data.dtype.kind in "biu" else None


def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running sums along ``dim``; integers and bools sum to int64."""
    np_dtype = _int_to_long(input, dtype)
    d = input._dim(dim)
    check_grad_dtype(input, np_dtype if dtype is not None else None)
    return Cumsum.apply(input, dim=d, dtype=np_dtype)


class Cumprod(Op, name="CumprodBackward0"):
    """out_i = x_0 * ... * x_i along ``dim``.

    dx_i = sum_{j >= i} g_j prod_{k <= j, k != i} x_k: with no zero in x this is (reversed running sum of g out)_i
    / x_i; with zeros, PyTorch's O(n) formula on arrays, and under create_graph the products that leave x_i out,
    one row per i (differentiable again).
    """

    save_inputs = (0,)
    save_output = True

    def forward(self, x, dim, dtype):
        self.dim = dim
        if x.ndim == 0:
            return x.astype(dtype) if dtype is not None else x.copy()
        with np.errstate(over="ignore", invalid="ignore"):
            return _running("cumprod", x, dim, dtype)

    def backward(self, g):
        x, out = self.saved_tensors
        xd = dual.data(x)
        d = self.dim
        g = _in_dtype(g, xd.dtype)
        if xd.size <= 1 or xd.shape[d] == 1:
            return g
        if not isinstance(g, Tensor):
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return _cumprod_grad(g, xd, out, d)
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


def _cumprod_grad(g, x, out, d: int):
    """PyTorch's O(n) gradient of cumprod on arrays: before the first zero, the reversed running sum of g * out
    divided by x; at the first zero, the product before it times sum_j g_j prod_{z < k <= j} x_k up to the second
    zero; after it, 0."""
    xp = xp_of(x)
    w = out * g
    is_zero = x == 0
    if not is_zero.any():
        return _reversed_cumsum(w, d) / x
    zeros_so_far = xp.cumsum(is_zero, axis=d)
    before = zeros_so_far == 0
    grad = xp.where(before, _reversed_cumsum(xp.where(before, w, 0), d) / x, 0).astype(x.dtype)
    one_zero = zeros_so_far == 1
    first = one_zero & is_zero
    between = one_zero & ~first
    kept = _cumprod(xp.where(between, x, 1).astype(x.dtype), d)
    sums = (kept * xp.where(one_zero, g, 0)).sum(axis=d, keepdims=True)
    lead = (slice(None),) * d
    prev = xp.concatenate([xp.ones_like(out[lead + (slice(0, 1),)]), out[lead + (slice(0, -1),)]], axis=d)
    at_first = xp.take_along_axis(prev, xp.expand_dims(xp.argmax(first, axis=d), d), axis=d)
    return xp.where(first, sums * at_first, grad)


def _reversed_cumsum(v, d: int):
    return flip_grads(_cumsum(flip_grads(v, (d,)), d), (d,))


def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running products along ``dim``; integers and bools multiply to int64."""
    np_dtype = _int_to_long(input, dtype)
    d = input._dim(dim)
    check_grad_dtype(input, np_dtype if dtype is not None else None)
    if np_dtype is not None and input._data.dtype == np_dtype:
        np_dtype = None
    return Cumprod.apply(input, dim=d, dtype=np_dtype)


class ProdAll(Op, name="ProdBackward0"):
    """out = the product of all of x.   dx_i = g * (product of the others), exact where x has zeros."""

    save_inputs = (0,)

    def forward(self, x, dim, keepdim):
        self.dim, self.keepdim, self.in_shape = dim, keepdim, x.shape
        with np.errstate(over="ignore", invalid="ignore"):
            return x.prod(axis=dim, keepdims=keepdim)

    def backward(self, g):
        (x,) = self.saved_tensors
        if not self.in_shape:
            return g
        xd = dual.data(x)
        axes = None if self.dim is None else (self.dim,)
        g = dual.keep_dims(g, self.in_shape, axes, self.keepdim)
        if not isinstance(g, Tensor):
            zeros = int((xd == 0).sum())
            if not zeros:  # out / x, as PyTorch (nan at an inf)
                with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                    return g * (xd.prod(axis=self.dim, keepdims=True) / xd)
            if zeros > 1 and self.dim is None:  # every product of the others holds a zero
                return xp_of(xd).zeros_like(xd)
        with np.errstate(invalid="ignore", over="ignore"):
            if self.dim is None:
                return g * _prod_others(x.reshape(-1), 0).reshape(self.in_shape)
            return g * _prod_others(x, self.dim)


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
    if enabled_threads:  # only while some thread has autocast on
        (input,) = autocast_inputs("prod", input)
    np_dtype = _int_to_long(input, dtype)
    if dim is not None:
        input._dim(dim)
    check_grad_dtype(input, np_dtype if dtype is not None else None)
    if np_dtype is not None and input._data.dtype != np_dtype:
        input = input.to(to_dtype(np_dtype) if dtype is None else dtype)
    if dim is None:
        return ProdAll.apply(input, dim=None, keepdim=False)
    if input._data.ndim == 0:
        input._dim(dim)
        return ProdDim.apply(input, dim=None, keepdim=False)
    return ProdDim.apply(input, dim=input._dim(dim), keepdim=bool(keepdim))
