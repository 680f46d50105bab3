"""Parameter initialisation, as ``torch.nn.init``: each function fills a tensor in place, unrecorded (under no_grad),
drawing from the seeded default generator of the tensor's device (or ``generator``), and returns the tensor.

The scaled schemes keep the variance of activations (Glorot/Xavier) or of forward signals through rectifiers
(He/Kaiming) roughly constant from layer to layer:
    xavier:  std = gain * sqrt(2 / (fan_in + fan_out))
    kaiming: std = gain / sqrt(fan),  gain = calculate_gain(nonlinearity, a)
and a uniform draw in [-b, b] has std b / sqrt(3). ``orthogonal_`` keeps the norm of every signal exactly (the
weight's rows or columns are orthonormal), and ``trunc_normal_`` draws a normal cut to [a, b].
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..autograd.backend import on_device, xp_of
from ..autograd.creation import empty_like
from ..autograd.grad_mode import no_grad
from ..autograd.ops.math import where
from ..autograd.random import Generator, generator_for
from ..autograd.tensor import Tensor

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity: 1 for linear and sigmoid, 5/3 for tanh, sqrt(2) for relu,
    sqrt(2 / (1 + a^2)) for leaky_relu with slope ``param`` (default 0.01), 3/4 for selu.

    >>> calculate_gain('relu') == math.sqrt(2)
    True
    """
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight of shape (out, in, *kernel): in * prod(kernel) and out * prod(kernel).

    >>> import trainkit
    >>> _calculate_fan_in_and_fan_out(trainkit.empty(8, 3, 5, 5))
    (75, 200)
    """
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill(tensor: Tensor, draw, generator: Generator | None) -> Tensor:
    """Write ``draw(rng, shape, dtype)`` into ``tensor``, drawing on its device in its dtype (float32 for halves)."""
    data = tensor._data
    dtype = np.float64 if data.dtype == np.float64 else np.float32
    with on_device(tensor.device):
        values = draw(generator_for(tensor.device, generator).rng, data.shape, dtype)
    with no_grad():
        tensor.copy_(Tensor._make(values.astype(data.dtype, copy=False)))
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill with values drawn uniformly from [a, b).

    >>> import trainkit
    >>> w = uniform_(trainkit.empty(1000), -2.0, 2.0)
    >>> bool((w >= -2).all() and (w < 2).all())
    True
    """
    with no_grad():  # the tensor's own fill draws what torch.nn.init draws for the same seed
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill with values drawn from the normal distribution N(mean, std^2)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``.

    >>> import trainkit
    >>> constant_(trainkit.empty(2), 0.5)
    tensor([0.5000, 0.5000])
    """
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    with no_grad():
        tensor.zero_()
    return tensor


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Glorot uniform: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a) and fan the
    fan_in (preserves forward variance) or fan_out (backward) per ``mode``.

    >>> import trainkit
    >>> w = kaiming_uniform_(trainkit.empty(64, 100), a=math.sqrt(5))  # Linear's default: b = 1 / sqrt(fan_in)
    >>> bool(w.abs().max() <= 0.1)
    True
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """He normal: N(0, std^2) with std = gain / sqrt(fan)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def _norm_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator | None = None,
) -> Tensor:
    r"""Fill with values drawn from the normal distribution :math:`\mathcal{N}(\text{mean}, \text{std}^2)` cut to
    :math:`[a, b]` (its density renormalised over that interval), by rejection, drawing as PyTorch 2.13 does (after
    the same ``manual_seed`` the values are PyTorch's).

    When the interval holds more than 30% of the normal's mass, values outside it are drawn again from the normal;
    otherwise candidates come uniformly from :math:`[a, b]` and are kept with probability
    :math:`e^{-((x - \text{mean})/\text{std})^2/2} / e^{-((m - \text{mean})/\text{std})^2/2}`, :math:`m` being
    the point of :math:`[a, b]` nearest the mean. A mean more than two standard deviations outside :math:`[a, b]`
    warns, as in PyTorch. ``a`` and ``b`` are absolute bounds, not multiples of ``std``.

    >>> import trainkit
    >>> w = trunc_normal_(trainkit.empty(10000), std=0.02, a=-0.04, b=0.04)
    >>> bool((w.abs() <= 0.04).all()), abs(w.std().item() - 0.02 * 0.8796) < 1e-3  # the cut normal's std
    (True, True)
    """
    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may be "
            "incorrect.",
            stacklevel=2,
        )
    with no_grad():
        mass = _norm_cdf((b - mean) / std) - _norm_cdf((a - mean) / std)
        if mass > 0.3:
            _reject_outside(tensor, mean, std, a, b, generator)
        else:
            _accept_by_density(tensor, mean, std, a, b, generator)
    return tensor


def _reject_outside(tensor: Tensor, mean: float, std: float, a: float, b: float, generator) -> None:
    """Draw from the normal and draw again wherever a value fell outside [a, b], the whole tensor at a time (the
    draws PyTorch makes, so a seed gives its numbers)."""
    lo, hi = (float(tensor._data.dtype.type(v)) for v in (a, b))  # the bounds as the tensor holds them
    result = tensor.normal_(mean, std, generator=generator)
    while True:
        outside = (result < lo) | (result > hi)
        if not outside.any():
            break
        result = where(outside, empty_like(result).normal_(mean, std, generator=generator), result)
    if result is not tensor:
        tensor.copy_(result)


def _accept_by_density(tensor: Tensor, mean: float, std: float, a: float, b: float, generator) -> None:
    """Propose uniformly on [a, b] and keep x with probability density(x) / density(mode), for intervals holding
    little of the normal's mass, where drawing from the normal would rarely land inside."""
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2
    candidates, accept = empty_like(tensor), empty_like(tensor)

    def log_ratio(x: Tensor) -> Tensor:  # log density(x) - log density(mode), computed in place
        return x.sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)

    with np.errstate(divide="ignore"):  # a uniform draw of exactly 0 has log -inf: always accepted, no warning
        tensor.uniform_(a, b, generator=generator)
        candidates.copy_(tensor)
        pending = accept.uniform_(generator=generator).log_().gt(log_ratio(candidates))
        if not pending.any():
            return
        result = tensor
        while True:
            candidates.uniform_(a, b, generator=generator)
            result = where(pending, candidates, result)
            pending = where(pending, accept.uniform_(generator=generator).log_().gt(log_ratio(candidates)), pending)
            if not pending.any():
                break
        tensor.copy_(result)


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Generator | None = None) -> Tensor:
    r"""Fill with a (semi-)orthogonal matrix times ``gain``, as Saxe et al. (2013) propose.

    The tensor is seen as a matrix of ``size(0)`` rows and the product of its other sizes as columns. A Gaussian
    matrix of that shape (transposed when it is wide) is factored :math:`A = QR`, and :math:`Q\,\text{diag}
    (\operatorname{sign} R_{ii})` (uniformly distributed over the orthogonal matrices) fills the tensor, so that
    :math:`W W^\top = g^2 I` (rows :math:`\le` columns) or :math:`W^\top W = g^2 I` (rows :math:`\ge` columns).

    >>> import trainkit
    >>> w = orthogonal_(trainkit.empty(3, 5))
    >>> bool(((w @ w.T) - trainkit.eye(3)).abs().max() < 1e-5)
    True
    """
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows

    def draw(rng, shape, dt):
        flattened = rng.standard_normal((rows, cols), dtype=dt)
        if rows < cols:
            flattened = flattened.T
        xp = xp_of(flattened)
        q, r = xp.linalg.qr(flattened)
        q *= xp.sign(xp.diagonal(r))
        if rows < cols:
            q = q.T
        return (q * dt(gain)).reshape(shape)

    return _fill(tensor, draw, generator)


__all__ = [
    "calculate_gain",
    "constant_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]
