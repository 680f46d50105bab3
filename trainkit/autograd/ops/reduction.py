"""Reductions: sum, mean, var, std, max/min/amax/amin (with their gradients) and argmax/argmin."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..backend import BFLOAT16_NP, FLOAT32_NP, float32_for_bfloat16, kind_of, to_dtype, xp_of
from ..function import Op
from ..grad_mode import is_grad_enabled
from ..tensor import Tensor
from . import dual, math
from .type_names import scalar_name

__all__ = [
    "amax",
    "amin",
    "argmax",
    "argmin",
    "count_nonzero",
    "max",
    "mean",
    "min",
    "nanmean",
    "nansum",
    "std",
    "std_mean",
    "sum",
    "var",
    "var_mean",
]

values_indices = namedtuple("values_indices", ["values", "indices"])


class _Omitted:
    """The default of ``dim`` where PyTorch tells a call without ``dim`` from one with ``dim=None``: they are
    different overloads, with different node names (``x.sum()`` is SumBackward0, ``x.sum(None)`` SumBackward1)."""

    def __repr__(self) -> str:
        return "None"


_OMITTED = _Omitted()


def _axes(input: Tensor, dim) -> tuple | None:
    """``dim`` (None, int or sequence) as a sorted tuple of non-negative axes, or None for all of them.

    A 0-d tensor accepts dim 0 and -1, as PyTorch does; reducing it over them is reducing over no axis (``()``).
    """
    if dim is None or dim is _OMITTED:
        return None
    if isinstance(dim, int):
        dim = (dim,)
    axes = tuple(sorted(unique_dims(input, dim)))
    if input._data.ndim == 0:
        return ()
    return axes or None


def unique_dims(input: Tensor, dims) -> list:
    """``dims`` made non-negative, with PyTorch's error for a dimension named twice."""
    seen: list = []
    for d in dims:
        d = input._dim(d)
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims: name each dimension once")
        seen.append(d)
    return seen


def _empty_dim_error(name: str, input: Tensor, dim, normalise: bool) -> None:
    """PyTorch's IndexError for a max-like reduction over a dimension of size 0."""
    if dim is None or input._data.size:
        return
    for d in (dim,) if isinstance(dim, int) else dim:
        if input._data.ndim and input._data.shape[input._dim(d)] == 0:
            shown = input._dim(d) if normalise else d
            raise IndexError(f"{name}(): Expected reduction dim {shown} to have non-zero size.")


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
        # NumPy adds bfloat16 in bfloat16: accumulate in float32
        if dtype is None and x.dtype is not FLOAT32_NP and x.dtype == BFLOAT16_NP:
            return x.sum(axis=axes, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
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
        if x.dtype is not FLOAT32_NP and x.dtype == BFLOAT16_NP:  # as in Sum
            return x.mean(axis=axes, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
        return x.mean(axis=axes, keepdims=keepdim)

    def backward(self, g):
        scale = 1.0 / self.n if self.n else float("nan")  # an empty input: its gradient is empty too
        g = dual.keep_dims(g, self.in_shape, self.axes, self.keepdim) * scale
        return dual.broadcast_to(g, self.in_shape)


class MeanAll(Mean, name="MeanBackward0"):
    pass


def _moment(x, axes, keepdim, correction, root: bool):
    """var (or std) of x, accumulated in float64 for float32 as PyTorch does on the CPU: the squares of float32
    values overflow long before their variance does."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if x.dtype == np.float32 and x.size and (axes is None or len(axes) == x.ndim):
            # over every element PyTorch takes the mean in float32 (where a sum of huge values overflows to inf,
            # and the variance with it) and only the squared deviations in float64
            with np.errstate(over="ignore"):
                d = x.astype(np.float64) - float(x.mean(dtype=np.float32))
                dof = x.size - correction
                out = (d * d).sum(axis=axes, keepdims=keepdim) / (dof if dof > 0 else 0)
                return (xp_of(x).sqrt(out) if root else out).astype(np.float32)
        if x.dtype == np.float32:
            out = x.var(axis=axes, keepdims=keepdim, ddof=correction, dtype=np.float64)
            with np.errstate(over="ignore"):
                return (xp_of(x).sqrt(out) if root else out).astype(np.float32)
        out = x.var(axis=axes, keepdims=keepdim, ddof=correction)
        return xp_of(x).sqrt(out) if root else out


def _var_grad(g, x, n: int, correction, axes):
    """PyTorch's var_backward, on arrays or Tensors; ``g`` already has the reduced dimensions kept. Over all
    elements with no degree of freedom left, the gradient is g * inf (nan where x equals its mean); over ``dim``
    it is g * 2 (x - mean) / (N - correction) whatever the sign of the divisor."""
    xd = dual.data(x)
    xp = xp_of(xd)
    mean = x.mean(axis=axes, keepdims=True)
    dof = n - correction
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if (axes is None or xd.ndim == 0) and dof <= 0:
            return g * xp.where(xd == dual.data(mean), np.nan, np.inf).astype(xd.dtype)
        scale = 2.0 / dof if dof else float("inf")
        return scale * g * (x - mean)


class Var(Op, name="VarBackward0"):
    """out = sum((x - mean)^2) / (N - correction).   dx = g * 2 (x - mean) / (N - correction)."""

    save_inputs = (0,)

    @float32_for_bfloat16
    def forward(self, x, axes, keepdim, correction):
        self.in_shape, self.axes, self.keepdim, self.correction = x.shape, axes, keepdim, correction
        self.n = _count(x.shape, axes)
        return _moment(x, axes, keepdim, correction, False)

    def backward(self, g):
        (x,) = self.saved_tensors
        g = dual.keep_dims(g, self.in_shape, self.axes, self.keepdim)
        return _var_grad(g, x, self.n, self.correction, self.axes)


class Std(Op, name="StdBackward0"):
    """out = sqrt(var(x)).   dx = var's gradient for g / (2 out), taken as 0 where out is 0 (as PyTorch)."""

    save_inputs = (0,)
    save_output = True

    @float32_for_bfloat16
    def forward(self, x, axes, keepdim, correction):
        self.in_shape, self.axes, self.keepdim, self.correction = x.shape, axes, keepdim, correction
        self.n = _count(x.shape, axes)
        return _moment(x, axes, keepdim, correction, True)

    def backward(self, g):
        x, out = self.saved_tensors
        keep = dual.keep_dims
        out = keep(out, self.in_shape, self.axes, self.keepdim)
        g = keep(g, self.in_shape, self.axes, self.keepdim)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            g_var = dual.where(dual.data(out) == 0, 0.0, g / (out * 2))
        return _var_grad(g_var, x, self.n, self.correction, self.axes)


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
    """out = the largest element.   dx = g shared evenly among the elements equal to it (the nans when it is nan)."""

    def backward(self, g):
        x, out = self.saved_tensors
        xd, od = dual.data(x), dual.data(out)
        xp = xp_of(xd)
        hit = xp.isnan(xd) if bool(xp.isnan(od)) else xd == od
        return g * (hit / hit.sum()).astype(xd.dtype)


class MinAll(MaxAll, name="MinBackward1"):
    reduce = "min"


class MaxDim(Op, name="MaxBackward0"):
    """values = x at ``index`` along ``dim``.   dx = g at that index, 0 elsewhere."""

    def forward(self, x, dim, keepdim, index):
        self.in_shape, self.dim, self.keepdim = x.shape, dim, keepdim
        self.extra = index  # with the reduced dimension kept
        if x.ndim == 0:
            return x.copy()
        out = xp_of(x).take_along_axis(x, index, axis=dim)
        return out if keepdim else out.squeeze(dim)

    def backward(self, g):
        if not self.in_shape:
            return g
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


def check_grad_dtype(input: Tensor, np_dtype) -> None:
    """PyTorch's error for a reduction asked (``dtype=``) for an integer or bool result of an input that requires
    grad: such a result could not carry a gradient."""
    if np_dtype is not None and np.dtype(np_dtype).kind in "biu" and input.requires_grad and is_grad_enabled():
        raise RuntimeError(
            f"Autograd not support dtype: {scalar_name(np_dtype)}. Reduce into a floating dtype and cast the "
            "result, or detach the input first"
        )


def sum(input: Tensor, dim=_OMITTED, keepdim: bool = False, *, dtype=None, **kwargs) -> Tensor:
    """Sum over ``dim`` (all dimensions when None); bools and integers sum to int64.

    >>> import trainkit
    >>> trainkit.ones(2, 3).sum(dim=1)
    tensor([3., 3.])
    """
    cls = SumAll if dim is _OMITTED and "axis" not in kwargs and not keepdim else Sum
    dim, keepdim = _kw(dim, keepdim, kwargs)
    np_dtype = to_dtype(dtype).np if dtype is not None else None
    axes = _axes(input, dim)
    check_grad_dtype(input, np_dtype)
    if np_dtype is None and input._data.dtype.kind in "bui":
        np_dtype = np.int64
    return cls.apply(input, axes=axes, keepdim=keepdim, dtype=np_dtype)


def mean(input: Tensor, dim=_OMITTED, keepdim: bool = False, *, dtype=None, **kwargs) -> Tensor:
    """Mean over ``dim`` (all dimensions when None). Needs a floating dtype, as in PyTorch."""
    cls = MeanAll if dim is _OMITTED and "axis" not in kwargs and not keepdim else Mean
    dim, keepdim = _kw(dim, keepdim, kwargs)
    if dtype is not None:
        input = input.to(dtype)
    if kind_of(input._data.dtype) != "f":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {input.dtype}"
        )
    return cls.apply(input, axes=_axes(input, dim), keepdim=keepdim)


def _correction(unbiased, correction) -> float:
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _moment_args(name, input, dim, unbiased, keepdim, correction, kwargs):
    if isinstance(dim, bool):  # var(x, False) is the old unbiased argument
        dim, unbiased = None, dim
    dim, keepdim = _kw(dim, keepdim, kwargs)
    if kind_of(input._data.dtype) != "f":
        raise RuntimeError(f"{name} only support floating point and complex dtypes")
    return dict(axes=_axes(input, dim), keepdim=keepdim, correction=_correction(unbiased, correction))


def var(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, **kwargs) -> Tensor:
    """Variance over ``dim`` with Bessel's correction by default (``correction=1``)."""
    return Var.apply(input, **_moment_args("std and var", input, dim, unbiased, keepdim, correction, kwargs))


def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, **kwargs) -> Tensor:
    """Standard deviation over ``dim`` with Bessel's correction by default."""
    return Std.apply(input, **_moment_args("std and var", input, dim, unbiased, keepdim, correction, kwargs))


def _extreme(input, dim, keepdim, other, kwargs, reduce: str):
    if isinstance(dim, Tensor):
        other, dim = dim, None
    if other is not None:
        return math.maximum(input, other) if reduce == "max" else math.minimum(input, other)
    dim, keepdim = _kw(dim, keepdim, kwargs)
    if dim is None:
        if input._data.size == 0:
            raise RuntimeError(
                f"{reduce}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        return (MaxAll if reduce == "max" else MinAll).apply(input, axes=None, keepdim=False)
    d = input._dim(dim)
    _empty_dim_error(reduce, input, d, True)
    xp = xp_of(input._data)
    if input._data.ndim == 0:
        index = xp.zeros((), dtype=np.int64)
        values = (MaxDim if reduce == "max" else MinDim).apply(input, dim=0, keepdim=keepdim, index=index)
        return values_indices(values, Tensor._make(index))
    find = xp.argmax if reduce == "max" else xp.argmin
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


def _amax(cls, input: Tensor, dim, keepdim, kwargs) -> Tensor:
    dim, keepdim = _kw(dim, keepdim, kwargs)
    name = "amax" if cls is Amax else "amin"
    if dim == () or dim == [] or dim is None:
        if input._data.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        return cls.apply(input, axes=None, keepdim=keepdim)
    _empty_dim_error(name, input, dim, False)
    return cls.apply(input, axes=_axes(input, dim), keepdim=keepdim)


def amax(input: Tensor, dim=(), keepdim: bool = False, **kwargs) -> Tensor:
    """Largest values over ``dim`` (all when empty); ties share the gradient evenly."""
    return _amax(Amax, input, dim, keepdim, kwargs)


def amin(input: Tensor, dim=(), keepdim: bool = False, **kwargs) -> Tensor:
    """Smallest values over ``dim`` (all when empty); ties share the gradient evenly."""
    return _amax(Amin, input, dim, keepdim, kwargs)


def _arg(input: Tensor, dim, keepdim: bool, find: str, kwargs) -> Tensor:
    dim, keepdim = _kw(dim, keepdim, kwargs)
    data = input._data
    if data.dtype.kind == "b":
        raise RuntimeError(f"{find}(): does not support bool input")
    xp = xp_of(data)
    if dim is None:
        if data.size == 0:
            raise IndexError(f"{find}(): Expected reduction dim to be specified for input.numel() == 0.")
        out = getattr(xp, find)(data.reshape(-1))
        if keepdim:
            out = xp.asarray(out).reshape((1,) * data.ndim)
    else:
        d = input._dim(dim)
        _empty_dim_error(find, input, d, True)
        out = getattr(xp, find)(data, axis=d, keepdims=keepdim) if data.ndim else xp.zeros((), dtype=np.int64)
    return Tensor._make(xp.asarray(out).astype(np.int64))


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False, **kwargs) -> Tensor:
    """Index of the largest element (of the flattened tensor when ``dim`` is None)."""
    return _arg(input, dim, keepdim, "argmax", kwargs)


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False, **kwargs) -> Tensor:
    """Index of the smallest element (of the flattened tensor when ``dim`` is None)."""
    return _arg(input, dim, keepdim, "argmin", kwargs)


def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """The number of non-zero elements, over all of ``input`` or over ``dim`` (an int or several), as int64.

    >>> import trainkit
    >>> count_nonzero(trainkit.tensor([[0.0, 1.0], [2.0, 0.0]]), dim=0)
    tensor([1, 1])
    """
    data = input._data
    if dim is None:
        axes = None
    else:
        axes = tuple(input._dim(d) for d in ((dim,) if isinstance(dim, int) else dim))
        for i, d in enumerate(axes):
            if d in axes[:i]:  # count_nonzero's own wording, shorter than the other reductions'
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        if data.ndim == 0:
            axes = None
    return Tensor._make(xp_of(data).count_nonzero(data, axis=axes).astype("int64"))


def _running_mean(x, axes, keepdim):
    """The mean as PyTorch's one-pass (Welford) kernel gives it: accumulated in float64 for float32, and, over
    values with an infinity, m_k = m_(k-1) + (x_k - m_(k-1)) / k element by element, so that an infinity
    followed by any other value makes the mean NaN (inf - inf), as there."""
    xp = xp_of(x)
    wide = np.float64 if x.dtype == np.float32 else x.dtype
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is the NaN wanted
        mean = x.mean(axis=axes, keepdims=True, dtype=wide)
    if x.size and not xp.isfinite(mean).all():
        axes_ = tuple(range(x.ndim)) if axes is None else axes
        rest = [a for a in range(x.ndim) if a not in axes_]
        rows = xp.transpose(x, rest + list(axes_)).reshape(-1, _count(x.shape, axes_)).astype(wide)
        running = xp.zeros(rows.shape[0], dtype=wide)
        with np.errstate(invalid="ignore", over="ignore"):
            for k in range(rows.shape[1]):
                running = running + (rows[:, k] - running) / (k + 1)
        mean = running.reshape(mean.shape)
    if not keepdim:
        mean = mean.reshape([n for i, n in enumerate(x.shape) if axes is not None and i not in axes])
    return mean.astype(x.dtype, copy=False)


class VarMean(Op, name="VarMeanBackward0"):
    """(var, mean) of x over ``axes`` in one node.   dx = var's gradient for g_var + g_mean / N broadcast back."""

    save_inputs = (0,)
    multi_output = fresh_outputs = True
    root = False  # StdMean takes the square root of the variance

    def forward(self, x, axes, keepdim, correction):
        self.in_shape, self.axes, self.keepdim, self.correction = x.shape, axes, keepdim, correction
        self.n = _count(x.shape, axes)
        return _moment(x, axes, keepdim, correction, self.root), _running_mean(x, axes, keepdim)

    def backward(self, g_moment, g_mean):
        (x,) = self.saved_tensors
        keep = dual.keep_dims
        g_moment = keep(g_moment, self.in_shape, self.axes, self.keepdim)
        if self.root:  # std's gradient: var's for g / (2 std), 0 where std is 0 (as Std)
            out = (
                std(x, dim=self.axes, correction=self.correction, keepdim=True)
                if isinstance(x, Tensor)
                else _moment(x, self.axes, True, self.correction, True)
            )
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                g_moment = dual.where(dual.data(out) == 0, 0.0, g_moment / (out * 2))
        grad = _var_grad(g_moment, x, self.n, self.correction, self.axes)
        scale = 1.0 / self.n if self.n else float("nan")
        return grad + dual.broadcast_to(keep(g_mean, self.in_shape, self.axes, self.keepdim) * scale, self.in_shape)


class StdMean(VarMean, name="StdMeanBackward0"):
    """(std, mean) of x over ``axes`` in one node.   dx = std's gradient for g_std + g_mean / N broadcast back."""

    root = True


def var_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, **kwargs) -> tuple:
    """The variance (with Bessel's correction by default) and the mean over ``dim``, as a pair.

    >>> import trainkit
    >>> var_mean(trainkit.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    return VarMean.apply(input, **_moment_args("var_mean", input, dim, unbiased, keepdim, correction, kwargs))


def std_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, **kwargs) -> tuple:
    """The standard deviation (with Bessel's correction by default) and the mean over ``dim``, as a pair.

    >>> import trainkit
    >>> std_mean(trainkit.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    return StdMean.apply(input, **_moment_args("std_mean", input, dim, unbiased, keepdim, correction, kwargs))


class Nansum(Op, name="NansumBackward0"):
    """out = sum of x over ``axes``, NaN counting as 0.   dx = g broadcast back, 0 where x is NaN."""

    save_inputs = (0,)

    def forward(self, x, axes, keepdim, dtype=None):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        xp = xp_of(x)
        with np.errstate(invalid="ignore", over="ignore"):  # sums of huge values overflow to inf, as in PyTorch
            return xp.where(xp.isnan(x), x.dtype.type(0), x).sum(axis=axes, keepdims=keepdim, dtype=dtype)

    def backward(self, g):
        (x,) = self.saved_tensors
        raw = dual.data(x)
        g = dual.broadcast_to(dual.keep_dims(g, self.in_shape, self.axes, self.keepdim), self.in_shape)
        nan = xp_of(raw).isnan(raw)
        return dual.where(nan, 0, g) if nan.any() else g


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum over ``dim`` (all dimensions when None) with NaN taken as 0; bools and integers sum to int64.

    >>> import trainkit
    >>> nansum(trainkit.tensor([1.0, float("nan"), 2.0]))
    tensor(3.)
    """
    np_dtype = to_dtype(dtype).np if dtype is not None else None
    axes = _axes(input, dim)  # PyTorch checks the dimensions first
    check_grad_dtype(input, np_dtype)
    if input._data.dtype.kind in "bui":
        return sum(input, dim, keepdim, dtype=dtype)
    return Nansum.apply(input, axes=axes, keepdim=bool(keepdim), dtype=np_dtype)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Mean over ``dim`` of the elements that are not NaN: ``nansum`` divided by their count (PyTorch composes it
    the same way, so that the result's node is the division's).

    >>> import trainkit
    >>> nanmean(trainkit.tensor([1.0, float("nan"), 2.0]))
    tensor(1.5000)
    """
    if kind_of(input._data.dtype) != "f":
        raise RuntimeError(
            "nanmean(): expected input to have floating point or complex dtype but got "
            f"{scalar_name(input._data.dtype)}"
        )
    data = input._data
    present = Tensor._make(~xp_of(data).isnan(data))
    count = sum(present, dim, keepdim)
    return math.div(nansum(input, dim, keepdim, dtype=dtype), count)
