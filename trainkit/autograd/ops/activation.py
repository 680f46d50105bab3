"""Activations and normalised exponentials: ReLU, sigmoid, tanh, softmax, log-softmax, logsumexp. Sigmoid and tanh
are rows of ``ops.table``; the others need more than a formula."""

from __future__ import annotations

import numpy as np

from .. import workspace
from ..backend import float32_for_bfloat16, kind_of, xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual
from .table import as_floating, elementwise

__all__ = ["log_softmax", "logsumexp", "relu", "sigmoid", "softmax", "tanh"]


class Relu(Op, name="ReluBackward0"):
    """out = max(x, 0).   dx = g where out > 0 (or nan)."""

    save_output = True

    def forward(self, x):
        xp = xp_of(x)
        if x.nbytes >= workspace.MIN_BYTES and kind_of(x.dtype) == "f":  # large activations: their memory is reused
            return xp.maximum(x, 0, out=workspace.empty(x.shape, x.dtype, xp))
        return xp.maximum(x, 0)

    def backward(self, g):
        (out,) = self.saved_tensors
        mask = dual.data(out) != 0  # out is >= 0 or nan; nan lets the gradient through, as PyTorch
        # g * mask is what dual.keep computes too, but keep must then look for an inf or nan that the mask turned
        # into nan (a pass over the result, under np.errstate, which costs more than the product on small arrays).
        # A finite sum of g rules out any such value beforehand; the rare other cases go to keep.
        if type(g) is np.ndarray and np.isfinite(g.sum()):
            if g.nbytes < workspace.MIN_BYTES:
                return g * mask
            return np.multiply(g, mask, out=workspace.empty(g.shape, g.dtype))
        return dual.keep(g, mask)


# ------------------------------------------------------------------------------------------------ table rows
Sigmoid, sigmoid = elementwise(
    "sigmoid",
    "SigmoidBackward0",
    "out",
    "sigmoid(x)",
    "g * out * one_minus(out)",
    "1 / (1 + e^-x), computed without overflow; integers and bools in the default float dtype.",
)
Tanh, tanh = elementwise(
    "tanh",
    "TanhBackward0",
    "out",
    "xp.tanh(x)",
    "g * one_minus(out * out)",
    "tanh x element-wise; integers and bools in the default float dtype.",
)


class Softmax(Op, name="SoftmaxBackward0"):
    """out_i = e^x_i / sum_j e^x_j along ``dim``.   dx = out * (g - sum(g * out))."""

    save_output = True

    @float32_for_bfloat16
    def forward(self, x, dim):
        self.dim = dim
        xp = xp_of(x)
        if x.ndim == 0 or x.size == 0:  # the max of nothing: there is none to subtract
            self.dim = None if x.ndim == 0 else dim
            return xp.exp(x - x) if x.ndim == 0 else x.copy()
        e = x - x.max(axis=dim, keepdims=True)
        xp.exp(e, out=e)
        e /= e.sum(axis=dim, keepdims=True)
        return e

    def backward(self, g):
        (out,) = self.saved_tensors
        return out * (g - (g * out).sum(axis=self.dim, keepdims=True))


class LogSoftmax(Op, name="LogSoftmaxBackward0"):
    """out = x - log(sum e^x) along ``dim``.   dx = g - e^out * sum(g)."""

    save_output = True

    @float32_for_bfloat16
    def forward(self, x, dim):
        self.dim = dim
        xp = xp_of(x)
        if x.ndim == 0 or x.size == 0:
            self.dim = None if x.ndim == 0 else dim
            return x - x
        shifted = x - x.max(axis=dim, keepdims=True)
        shifted -= xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))
        return shifted

    def backward(self, g):
        (out,) = self.saved_tensors
        return g - dual.exp(out) * g.sum(axis=self.dim, keepdims=True)


class Logsumexp(Op, name="LogsumexpBackward0"):
    """out = log(sum e^x) over ``dims``.   dx = g * e^(x - out)."""

    save_inputs = (0,)
    save_output = True

    @float32_for_bfloat16
    def forward(self, x, dims, keepdim):
        self.dims, self.keepdim = dims, keepdim
        xp = xp_of(x)
        if x.size == 0:  # the log of an empty sum: -inf
            with np.errstate(divide="ignore"):
                out = xp.log(xp.exp(x).sum(axis=dims, keepdims=True))
        else:
            m = x.max(axis=dims, keepdims=True)
            m = xp.where(xp.isfinite(m), m, 0)
            out = xp.log(xp.exp(x - m).sum(axis=dims, keepdims=True)) + m
        return out if keepdim else out.reshape(tuple(n for i, n in enumerate(out.shape) if i not in dims))

    def backward(self, g):
        x, out = self.saved_tensors
        shape = tuple(dual.data(x).shape)
        return dual.keep_dims(g, shape, self.dims, self.keepdim) * dual.exp(
            x - dual.keep_dims(out, shape, self.dims, self.keepdim)
        )


def _dims(input: Tensor, dim) -> tuple:
    """``dim`` as sorted non-negative axes; a 0-d tensor takes dim 0 and -1 and reduces over no axis."""
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted(input._dim(d) for d in dim))
    if len(set(dims)) < len(dims):
        raise RuntimeError(
            f"dim {next(d for d in dims if dims.count(d) > 1)} appears multiple times in the list "
            "of dims: name each dimension once"
        )
    return () if input._data.ndim == 0 else dims


def _softmax_input(name: str, input: Tensor, dtype) -> Tensor:
    if dtype is not None:
        input = input.to(dtype)
    if kind_of(input._data.dtype) != "f":
        kind = "lastdim_kernel_impl" if input._data.ndim <= 1 else "kernel_impl"
        raise NotImplementedError(f"\"{name}_{kind}\" not implemented for '{_TYPE_NAMES.get(input._data.dtype.name)}'")
    return input


_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def relu(input: Tensor) -> Tensor:
    """max(x, 0) element-wise."""
    if input._data.dtype.kind == "b":
        raise RuntimeError("Boolean inputs not supported for relu")
    return Relu.apply(input)


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """Softmax along ``dim`` (required: PyTorch's implicit choice is deprecated).

    >>> import trainkit
    >>> trainkit.softmax(trainkit.zeros(2), dim=0)
    tensor([0.5000, 0.5000])
    """
    if dim is None:
        raise TypeError("softmax() needs dim: the dimension along which the values sum to 1")
    d = input._dim(dim)
    if dtype is not None or kind_of(input._data.dtype) != "f":
        input = _softmax_input("softmax", input, dtype)
    return Softmax.apply(input, dim=d)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably."""
    if dim is None:
        raise TypeError("log_softmax() needs dim: the dimension along which softmax sums to 1")
    d = input._dim(dim)
    if dtype is not None or kind_of(input._data.dtype) != "f":
        input = _softmax_input("log_softmax", input, dtype)
    return LogSoftmax.apply(input, dim=d)


def logsumexp(input: Tensor, dim=None, keepdim: bool = False, **kwargs) -> Tensor:
    """log(sum(exp(x))) over ``dim``, computed stably; integers and bools in the default float dtype."""
    if "axis" in kwargs:  # PyTorch's alias for dim
        dim = kwargs.pop("axis")
    if "keepdims" in kwargs:
        keepdim = kwargs.pop("keepdims")
    if kwargs or dim is None:
        missing = f"got an unexpected keyword argument '{next(iter(kwargs))}'" if kwargs else 'missing "dim"'
        raise TypeError(f"logsumexp() {missing}")
    return Logsumexp.apply(as_floating(input), dims=_dims(input, dim), keepdim=bool(keepdim))
