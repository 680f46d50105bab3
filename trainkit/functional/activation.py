"""Activations with ``torch.nn.functional``'s signatures: relu and leaky_relu (with ``inplace``), gelu and
softplus, softmax and log_softmax (with PyTorch's legacy implicit ``dim``); sigmoid, tanh and logsumexp are the
core's. elu and prelu are in ``rectifiers``, the self-gated silu, mish and hardswish in ``self_gated``.
"""

from __future__ import annotations

import math as _math
import warnings

import numpy as np

from ..autograd.backend import bfloat16_result, kind_of, xp_of
from ..autograd.function import Op
from ..autograd.ops import activation, dual
from ..autograd.ops.activation import logsumexp, sigmoid, tanh
from ..autograd.ops.erf import CHUNK, erf, erf_rational_
from ..autograd.ops.inplace import apply_inplace
from ..autograd.ops.kernels import not_implemented, quiet_all
from ..autograd.tensor import Tensor

__all__ = [
    "gelu",
    "leaky_relu",
    "log_softmax",
    "logsumexp",
    "relu",
    "sigmoid",
    "softmax",
    "softplus",
    "tanh",
]


def _tanh(v):
    return activation.tanh(v) if isinstance(v, Tensor) else xp_of(v).tanh(v)


def dual_sigmoid(v):
    """The logistic sigmoid of an array (the plain backward) or a Tensor (create_graph), without overflow."""
    if isinstance(v, Tensor):
        return activation.sigmoid(v)
    xp = xp_of(v)
    e = xp.exp(-xp.abs(v))  # never overflows
    return xp.where(v >= 0, 1, e) / (1 + e)


# -------------------------------------------------------------------------------------------------- activations
def _leaky(x, slope: float):
    # max(x, slope x) is x for x > 0 and slope x below, for any slope <= 1 (min for steeper ones): no select needed
    xp = xp_of(x)
    return bfloat16_result(xp.maximum(x, x * slope) if slope <= 1 else xp.minimum(x, x * slope), x)


def _leaky_slope(positive, slope: float, dtype):
    """1 where ``positive``, else slope, as an array of ``dtype``."""
    out = positive.astype(dtype)
    out *= 1 - slope
    out += slope
    return out


class LeakyRelu(Op, name="LeakyReluBackward0"):
    """out = x where x > 0, else slope * x.   dx = g where x > 0, else slope * g."""

    save_inputs = (0,)

    def forward(self, x, slope):
        self.slope = slope
        return _leaky(x, slope)

    def backward(self, g):
        (x,) = self.saved_tensors
        x = dual.data(x)
        return g * _leaky_slope(x > 0, self.slope, x.dtype)


class LeakyReluInplace(Op, name="LeakyReluBackward1"):
    """In-place leaky ReLU: reads its output (the input is overwritten), so it needs slope >= 0, as in PyTorch."""

    save_output = True

    def forward(self, x, slope):
        self.slope = slope
        return _leaky(x, slope)

    def backward(self, g):
        if self.slope < 0:
            raise RuntimeError(
                "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
                "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
                "version instead."
            )
        (out,) = self.saved_tensors
        out = dual.data(out)
        return g * _leaky_slope(out > 0, self.slope, out.dtype)


def floating_only(kernel: str, input: Tensor, name: str | None = None) -> None:
    """PyTorch's errors for an activation that takes a tensor and has no integer or bool kernel; ``name``: the
    function's, if not the kernel's without ``_cpu``.

    >>> import trainkit
    >>> floating_only("silu_cpu", trainkit.tensor([1]))
    Traceback (most recent call last):
    NotImplementedError: "silu_cpu" not implemented for 'Long'
    """
    if not isinstance(input, Tensor):
        name = name or kernel.removesuffix("_cpu")
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if kind_of(input._data.dtype) not in "fc":
        raise not_implemented(kernel, input._data.dtype)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0) element-wise (in ``input``'s storage with ``inplace``)."""
    return input.relu_() if inplace else activation.relu(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else ``negative_slope * x``.

    >>> import trainkit
    >>> leaky_relu(trainkit.tensor([-2.0, 3.0]), 0.5)
    tensor([-1.,  3.])
    """
    floating_only("leaky_relu_cpu", input)
    if inplace:
        return apply_inplace(input, LeakyReluInplace, slope=negative_slope)
    return LeakyRelu.apply(input, slope=negative_slope)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """Softmax along ``dim``; without ``dim``, PyTorch's legacy choice (0 for 0-, 1- and 3-D inputs, else 1)."""
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim, _stacklevel)
    return activation.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably; without ``dim``, PyTorch's legacy choice as ``softmax``."""
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim, _stacklevel)
    return activation.log_softmax(input, dim, dtype)


def _implicit_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument.",
        stacklevel=stacklevel,
    )
    return 0 if ndim in (0, 1, 3) else 1


_SQRT_HALF = _math.sqrt(0.5)
_INV_SQRT_2PI = 1 / _math.sqrt(2 * _math.pi)
_K = _math.sqrt(2 / _math.pi)  # the tanh approximation: gelu(x) ~ x/2 (1 + tanh(K (x + C x^3)))
_C = 0.044715


def _gelu_slope(x, approximate: str):
    """gelu'(x) of an array: Phi(x) + x phi(x), or the derivative of the tanh approximation."""
    xp = xp_of(x)
    if approximate == "tanh":
        x2 = x * x
        t = xp.tanh(_K * x * (1 + _C * x2))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (_K * (1 + 3 * _C * x2))
    return 0.5 * (1 + erf(x * _SQRT_HALF)) + x * xp.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _gelu_curvature(x, approximate: str):
    """gelu''(x), for arrays and Tensors: phi(x) (2 - x^2), or (1 - t^2)(u' - x t u'^2 + 3 K C x^2) with tanh."""
    x2 = x * x
    if approximate == "tanh":
        du = _K * (1 + 3 * _C * x2)
        t = _tanh(_K * x * (1 + _C * x2))
        return (1 - t * t) * (du - x * t * du * du + 3 * _K * _C * x2)
    return dual.exp(-0.5 * x2) * _INV_SQRT_2PI * (2 - x2)


def _gelu_grad(g, x, approximate: str):
    """g * gelu'(x); on Tensors an op of its own, whose gradient is known, since erf has no Tensor op."""
    if isinstance(g, Tensor) or isinstance(x, Tensor):
        return GeluBackward.apply(g, x, approximate=approximate)
    return g * _gelu_slope(x, approximate)


class Gelu(Op, name="GeluBackward0"):
    """out = x Phi(x) (Phi: the standard normal CDF), or x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) with
    approximate='tanh'.   dx = g * gelu'(x)."""

    save_inputs = (0,)

    def forward(self, x, approximate):
        self.approximate = approximate
        xp = xp_of(x)
        if approximate == "tanh":
            return bfloat16_result(0.5 * x * (1 + xp.tanh(_K * x * (1 + _C * x * x))), x)
        if x.dtype != xp.float32 or x.size < 2:
            return bfloat16_result(0.5 * x * (1 + erf(x * _SQRT_HALF)), x)
        # PyTorch's vectorised float32 kernel (any tensor of two or more elements) halves last, so x (1 + erf)
        # overflows beyond half the largest float, and its erf is nan at +-inf. Its erf is a rational function too:
        # erf_rational, once; 1 + erf is kept for the backward (2 Phi(x)), which then needs no erf of its own.
        out, self.extra = _chunked(_gelu_chunk, 2, x, x)
        out[xp.isinf(x)] = xp.nan
        return out

    def backward(self, g):
        (x,) = self.saved_tensors
        if self.extra is not None and not isinstance(g, Tensor):
            return _chunked(_gelu_grad_chunk, 1, x, x, g, self.extra)[0]
        return _gelu_grad(g, x, self.approximate)


def _chunked(kernel, outputs: int, like, *arrays) -> tuple:
    """Run ``kernel(outputs, inputs, scratch)`` over matching chunks of flat views of ``arrays`` (NumPy: ``CHUNK``
    elements at a time, so that a dozen passes over each chunk stay in cache; CuPy: all at once). It fills
    ``outputs`` new arrays of ``like``'s shape, returned."""
    xp = xp_of(like)
    flat = [xp.ascontiguousarray(a).reshape(-1) for a in arrays]
    outs = tuple(xp.empty(like.shape, like.dtype) for _ in range(outputs))
    flat_outs = [o.reshape(-1) for o in outs]
    size = like.size
    step = CHUNK if xp is np else max(size, 1)
    scratch = xp.empty((3, min(step, size)), like.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, size, step):
            n = min(step, size - lo)
            kernel([o[lo : lo + n] for o in flat_outs], [a[lo : lo + n] for a in flat], scratch[:, :n])
    return outs


def _gelu_chunk(outs, ins, scratch) -> None:
    """out = x (1 + erf(x / sqrt 2)) / 2, and 1 + erf(x / sqrt 2) kept."""
    (out, twice_cdf), (x,) = outs, ins
    np.multiply(x, _SQRT_HALF, out=twice_cdf)
    erf_rational_(twice_cdf, *scratch)
    twice_cdf += 1
    np.multiply(x, twice_cdf, out=out)
    out *= 0.5


def _gelu_grad_chunk(outs, ins, scratch) -> None:
    """dx = g (Phi(x) + x phi(x)), with Phi(x) from the kept 1 + erf."""
    (dx,), (x, g, twice_cdf) = outs, ins
    slope, half = scratch[0], scratch[1]
    np.multiply(x, x, out=slope)
    slope *= -0.5
    np.exp(slope, out=slope)
    slope *= x
    slope *= _INV_SQRT_2PI
    np.multiply(twice_cdf, 0.5, out=half)
    slope += half
    np.multiply(slope, g, out=dx)


class GeluBackward(Op, name="GeluBackwardBackward0"):
    """out = g * gelu'(x).   dg = gg * gelu'(x),  dx = gg * g * gelu''(x)."""

    save_inputs = (0, 1)
    save_only_for = {0: 1}

    def forward(self, g, x, approximate):
        self.approximate = approximate
        return g * _gelu_slope(x, approximate)

    def backward(self, gg):
        g, x = self.saved_tensors
        (fg, _), (fx, _) = self.next_functions
        dg = _gelu_grad(gg, x, self.approximate) if fg is not None else None
        dx = gg * g * _gelu_curvature(x, self.approximate) if fx is not None else None
        return dg, dx


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian Error Linear Unit: x * Phi(x), or its tanh approximation with ``approximate='tanh'``.

    >>> import trainkit
    >>> gelu(trainkit.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587,  0.0000,  0.8413])
    """
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    floating_only("GeluKernelImpl", input, "gelu")
    return Gelu.apply(input, approximate=approximate)


class Softplus(Op, name="SoftplusBackward0"):
    """out = log(1 + e^(beta x)) / beta, or x where beta x > threshold.
    dx = g * sigmoid(beta x), or g where beta x > threshold."""

    save_inputs = (0,)

    def forward(self, x, beta, threshold):
        self.beta, self.threshold = beta, threshold
        xp = xp_of(x)
        bx = x * beta
        with quiet_all(xp):  # nan in, nan out, without NumPy's warning
            return xp.where(bx > threshold, x, xp.logaddexp(0, bx) / beta)

    def backward(self, g):
        (x,) = self.saved_tensors
        bx = x * self.beta
        linear = dual.data(bx) > self.threshold
        return dual.where(linear, g, g * dual_sigmoid(bx))


def softplus(input: Tensor, beta: float = 1, threshold: float = 20) -> Tensor:
    """log(1 + e^(beta x)) / beta, and x itself where beta x > threshold (for numerical stability).

    >>> import trainkit
    >>> softplus(trainkit.tensor([0.0, 30.0]))
    tensor([ 0.6931, 30.0000])
    """
    floating_only("softplus_cpu", input)
    return Softplus.apply(input, beta=beta, threshold=threshold)
