"""Activations and normalised exponentials: ReLU, sigmoid, tanh, softmax, log-softmax, logsumexp."""

from __future__ import annotations

import numpy as np

from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual


class Relu(Op, name="ReluBackward0"):
    """out = max(x, 0).   dx = g where out > 0."""

    save_output = True

    def forward(self, x):
        return xp_of(x).maximum(x, 0)

    def backward(self, g):
        (out,) = self.saved_tensors
        mask = dual.data(out) > 0
        # g * mask is what dual.keep computes too, but keep must then look for an inf or nan that the mask turned
        # into nan (a pass over the result, under np.errstate, which costs more than the product on small arrays).
        # A finite sum of g rules out any such value beforehand; the rare other cases go to keep.
        if type(g) is np.ndarray and np.isfinite(g.sum()):
            return g * mask
        return dual.keep(g, mask)


class Sigmoid(Op, name="SigmoidBackward0"):
    """out = 1 / (1 + e^-x).   dx = g * out * (1 - out)."""

    save_output = True

    def forward(self, x):
        xp = xp_of(x)
        e = xp.exp(-xp.abs(x))  # never overflows: e <= 1
        return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))

    def backward(self, g):
        (out,) = self.saved_tensors
        return g * out * (1 - out)


class Tanh(Op, name="TanhBackward0"):
    """out = tanh x.   dx = g * (1 - out^2)."""

    save_output = True

    def forward(self, x):
        return xp_of(x).tanh(x)

    def backward(self, g):
        (out,) = self.saved_tensors
        return g * (1 - out * out)


class Softmax(Op, name="SoftmaxBackward0"):
    """out_i = e^x_i / sum_j e^x_j along ``dim``.   dx = out * (g - sum(g * out))."""

    save_output = True

    def forward(self, x, dim):
        self.dim = dim
        xp = xp_of(x)
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

    def forward(self, x, dim):
        self.dim = dim
        xp = xp_of(x)
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

    def forward(self, x, dims, keepdim):
        self.dims, self.keepdim = dims, keepdim
        xp = xp_of(x)
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
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(sorted(input._dim(d) for d in dim))


def relu(input: Tensor) -> Tensor:
    """max(x, 0) element-wise."""
    return Relu.apply(input)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + e^-x), computed without overflow."""
    return Sigmoid.apply(input)


def tanh(input: Tensor) -> Tensor:
    return Tanh.apply(input)


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """Softmax along ``dim`` (required: PyTorch's implicit choice is deprecated).

    >>> import trainkit
    >>> trainkit.softmax(trainkit.zeros(2), dim=0)
    tensor([0.5000, 0.5000])
    """
    if dim is None:
        raise TypeError("softmax() needs dim: the dimension along which the values sum to 1")
    if dtype is not None:
        input = input.to(dtype)
    return Softmax.apply(input, dim=input._dim(dim))


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably."""
    if dim is None:
        raise TypeError("log_softmax() needs dim: the dimension along which softmax sums to 1")
    if dtype is not None:
        input = input.to(dtype)
    return LogSoftmax.apply(input, dim=input._dim(dim))


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over ``dim``, computed stably."""
    return Logsumexp.apply(input, dims=_dims(input, dim), keepdim=keepdim)
