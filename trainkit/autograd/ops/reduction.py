"""Reductions: sum, mean, var, std, max/min/amax/amin (with their gradients) and argmax/argmin."""

from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from ..backend import to_dtype, xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual, math

values_indices = namedtuple("values_indices", ["values", "indices"])


def _axes(input: Tensor, dim) -> tuple | None:
    """``dim`` (None, int or sequence) as a sorted tuple of non-negative axes, or None for all of them."""
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = (dim,)
    axes = tuple(sorted({input._dim(d) for d in dim}))
    return axes if axes or input.ndim == 0 else None


def _count(shape: tuple, axes: tuple | None) -> int:
    n = 1
    for i, s in enumerate(shape):
        if axes is None or i in axes:
            n *= s
    return n


class Sum(Op, name="SumBackward1"):
    """out = sum of x over ``axes``.   dx = g broadcast back over the summed axes."""

    def forward(self, x, axes, keepdim, dtype=None):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        return x.sum(axis=axes, keepdims=keepdim, dtype=dtype)

    def backward(self, g):
        return dual.broadcast_to(dual.keep_dims(g, self.in_shape, self.axes, self.keepdim), self.in_shape)


class SumAll(Sum, name="SumBackward0"):
    pass


class Mean(Op, name="MeanBackward1"):
    """out = mean of x over ``axes`` (N values each).   dx = g / N broadcast back."""

    def forward(self, x, axes, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        self.n = _count(x.shape, axes)
        return x.mean(axis=axes, keepdims=keepdim)

    def backward(self, g):
        g = dual.keep_dims(g, self.in_shape, self.axes, self.keepdim) * (1.0 / self.n)
        return dual.broadcast_to(g, self.in_shape)


class MeanAll(Mean, name="MeanBackward0"):
    pass


class Var(Op, name="VarBackward0"):
    """out = sum((x - mean)^2) / (N - correction).   dx = g * 2 (x - mean) / (N - correction)."""

    save_inputs = (0,)

    def forward(self, x, axes, keepdim, correction):
        self.in_shape, self.axes, self.keepdim, self.correction = x.shape, axes, keepdim, correction
        self.n = _count(x.shape, axes)
        return x.var(axis=axes, keepdims=keepdim, ddof=correction)

    def backward(self, g):
        (x,) = self.saved_tensors
        centred = x - x.mean(axis=self.axes, keepdims=True)
        dof = self.n - self.correction
        scale = 2.0 / dof if dof > 0 else float("inf")  # no degrees of freedom: nan gradients, as PyTorch
        return dual.keep_dims(g, self.in_shape, self.axes, self.keepdim) * centred * scale


class Std(Op, name="StdBackward0"):
    """out = sqrt(var(x)).   dx = g * (x - mean) / ((N - correction) * out)."""

    save_inputs = (0,)
    save_output = True

    def forward(self, x, axes, keepdim, correction):
        self.in_shape, self.axes, self.keepdim, self.correction = x.shape, axes, keepdim, correction
        self.n = _count(x.shape, axes)
        return x.std(axis=axes, keepdims=keepdim, ddof=correction)

    def backward(self, g):
        x, out = self.saved_tensors
        centred = x - x.mean(axis=self.axes, keepdims=True)
        keep = dual.keep_dims
        denom = keep(out, self.in_shape, self.axes, self.keepdim) * builtins.max(self.n - self.correction, 0)
        return keep(g, self.in_shape, self.axes, self.keepdim) * centred / denom


class Amax(Op, name="AmaxBackward0"):
    """out = max of x over ``axes``.   dx = g shared evenly among the elements equal to the max."""

    save_inputs = (0,)
    save_output = True
    reduce = "max"

    def forward(self, x, axes, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        if x.size == 0 and (axes is None or any(x.shape[a] == 0 for a in axes)):
            raise RuntimeError(f"{self.reduce}(): Expected reduction dim to be specified for input.numel() == 0.")
        return getattr(x, self.reduce)(axis=axes, keepdims=keepdim)

    def backward(self, g):
        x, out = self.saved_tensors
        xd = dual.data(x)
        hit = xd == dual.data(dual.keep_dims(out, self.in_shape, self.axes, self.keepdim))
        share = hit / hit.sum(axis=self.axes, keepdims=True)
        return dual.keep_dims(g, self.in_shape, self.axes, self.keepdim) * share.astype(xd.dtype)


class Amin(Amax, name="AminBackward0"):
    reduce = "min"


class MaxAll(Amax, name="MaxBackward1"):
    pass


class MinAll(Amax, name="MinBackward1"):
    reduce = "min"


class MaxDim(Op, name="MaxBackward0"):
    """values = x at ``index`` along ``dim``.   dx = g at that index, 0 elsewhere."""

    def forward(self, x, dim, keepdim, index):
        self.in_shape, self.dim, self.keepdim = x.shape, dim, keepdim
        self.extra = index  # with the reduced dimension kept
        out = xp_of(x).take_along_axis(x, index, axis=dim)
        return out if keepdim else out.squeeze(dim)

    def backward(self, g):
        index = self.extra
        xp = xp_of(index)
        n = self.in_shape[self.dim]
        positions = xp.arange(n).reshape((n,) + (1,) * (len(self.in_shape) - self.dim - 1))
        hit = positions == index
        g = dual.keep_dims(g, self.in_shape, (self.dim,), self.keepdim)
        return dual.keep(g, hit)


class MinDim(MaxDim, name="MinBackward0"):
    pass


# --------------------------------------------------------------------------------------------------- functions
def _kw(dim, keepdim, kwargs):
    """PyTorch also accepts NumPy's names ``axis`` and ``keepdims``; backward formulas use them."""
    if "axis" in kwargs:
        dim = kwargs.pop("axis")
    if "keepdims" in kwargs:
        keepdim = kwargs.pop("keepdims")
    if kwargs:
        raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
    return dim, bool(keepdim)


def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, **kwargs) -> Tensor:
    """Sum over ``dim`` (all dimensions when None); bools and integers sum to int64.

    >>> import trainkit
    >>> trainkit.ones(2, 3).sum(dim=1)
    tensor([3., 3.])
    """
    dim, keepdim = _kw(dim, keepdim, kwargs)
    axes = _axes(input, dim)
    np_dtype = to_dtype(dtype).np if dtype is not None else None
    if np_dtype is None and input._data.dtype.kind in "bui":
        np_dtype = np.int64
    cls = SumAll if axes is None and not keepdim else Sum
    return cls.apply(input, axes=axes, keepdim=keepdim, dtype=np_dtype)


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, **kwargs) -> Tensor:
    """Mean over ``dim`` (all dimensions when None). Needs a floating dtype, as in PyTorch."""
    dim, keepdim = _kw(dim, keepdim, kwargs)
    if dtype is not None:
        input = input.to(dtype)
    if input._data.dtype.kind != "f":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {input.dtype}"
        )
    axes = _axes(input, dim)
    return (MeanAll if axes is None and not keepdim else Mean).apply(input, axes=axes, keepdim=keepdim)


def _correction(unbiased, correction) -> float:
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def var(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, **kwargs) -> Tensor:
    """Variance over ``dim`` with Bessel's correction by default (``correction=1``)."""
    if isinstance(dim, bool):  # var(x, False) is the old unbiased argument
        dim, unbiased = None, dim
    dim, keepdim = _kw(dim, keepdim, kwargs)
    return Var.apply(input, axes=_axes(input, dim), keepdim=keepdim, correction=_correction(unbiased, correction))


def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, **kwargs) -> Tensor:
    """Standard deviation over ``dim`` with Bessel's correction by default."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    dim, keepdim = _kw(dim, keepdim, kwargs)
    return Std.apply(input, axes=_axes(input, dim), keepdim=keepdim, correction=_correction(unbiased, correction))


def _extreme(input, dim, keepdim, other, kwargs, reduce: str):
    if isinstance(dim, Tensor):
        other, dim = dim, None
    if other is not None:
        return math.maximum(input, other) if reduce == "max" else math.minimum(input, other)
    dim, keepdim = _kw(dim, keepdim, kwargs)
    if dim is None:
        return (MaxAll if reduce == "max" else MinAll).apply(input, axes=None, keepdim=False)
    d = input._dim(dim)
    if input._data.ndim == 0:
        return values_indices(input.clone(), Tensor._make(xp_of(input._data).zeros((), dtype=np.int64)))
    find = xp_of(input._data).argmax if reduce == "max" else xp_of(input._data).argmin
    index = find(input._data, axis=d, keepdims=True)
    values = (MaxDim if reduce == "max" else MinDim).apply(input, dim=d, keepdim=keepdim, index=index)
    if not keepdim:
        index = index.squeeze(d)
    return values_indices(values, Tensor._make(index.astype(np.int64)))


def max(input: Tensor, dim=None, keepdim: bool = False, *, other=None, **kwargs):
    """``max(x)``: the largest element; ``max(x, dim)``: (values, indices); ``max(x, y)``: element-wise."""
    return _extreme(input, dim, keepdim, other, kwargs, "max")


def min(input: Tensor, dim=None, keepdim: bool = False, *, other=None, **kwargs):
    """``min(x)``: the smallest element; ``min(x, dim)``: (values, indices); ``min(x, y)``: element-wise."""
    return _extreme(input, dim, keepdim, other, kwargs, "min")


def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Largest values over ``dim`` (all when empty); ties share the gradient evenly."""
    axes = _axes(input, dim) if dim != () else None
    return Amax.apply(input, axes=axes, keepdim=keepdim)


def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Smallest values over ``dim`` (all when empty); ties share the gradient evenly."""
    axes = _axes(input, dim) if dim != () else None
    return Amin.apply(input, axes=axes, keepdim=keepdim)


def _arg(input: Tensor, dim, keepdim: bool, find: str) -> Tensor:
    data = input._data
    xp = xp_of(data)
    if dim is None:
        out = getattr(xp, find)(data.reshape(-1))
        if keepdim:
            out = xp.asarray(out).reshape((1,) * data.ndim)
    else:
        out = getattr(xp, find)(data, axis=input._dim(dim), keepdims=keepdim)
    return Tensor._make(xp.asarray(out).astype(np.int64))


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (of the flattened tensor when ``dim`` is None)."""
    return _arg(input, dim, keepdim, "argmax")


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element (of the flattened tensor when ``dim`` is None)."""
    return _arg(input, dim, keepdim, "argmin")
