"""Layer and group normalisation, and channel-wise dropout: ``F.layer_norm``, ``F.group_norm``, ``F.dropout1d`` and
``F.dropout2d``.

Layer and group normalisation are one node each, named as PyTorch names them (``NativeLayerNormBackward0``,
``NativeGroupNormBackward0``), with a hand-written backward. Both normalise groups of n values to
xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps) (the biased variance), then scale and shift by ``weight`` and
``bias``. Statistics are computed in the input's dtype (float16 inputs in float32, as PyTorch accumulates them). With
``create_graph`` the backward recomputes the statistics from the input with differentiable ops, so that second
derivatives come out right.

Channel dropout zeroes whole channels (``input[n, c]``) and scales the rest by 1 / (1 - p); it is a multiplication by
a random mask, so its node is ``MulBackward0``, as in PyTorch.
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings
from collections.abc import Sequence

import numpy as np

from ..backend import on_device, xp_of
from ..function import Op
from ..random import generator_for
from ..tensor import Tensor
from . import math as tmath

_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int",
                 "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _scalar_name(dtype) -> str:
    name = np.dtype(dtype).name
    return _SCALAR_NAMES.get(name, name)


def _compute_dtype(x):
    """float16 is normalised in float32: its sums would lose too much, and PyTorch accumulates them in float too."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _moments(x, axes: tuple, inv_n: float, eps: float):
    """Mean and 1 / sqrt(biased var + eps) of the array ``x`` over ``axes`` (kept as size-1 dimensions).

    Sums times 1/n rather than ``mean``, so that an empty group gives no warning (its output is empty anyway)."""
    mean = x.sum(axis=axes, keepdims=True) * inv_n
    d = x - mean
    var = (d * d).sum(axis=axes, keepdims=True) * inv_n
    with np.errstate(divide="ignore"):  # eps = 0 on a constant group: rstd = inf, out = nan, as in PyTorch
        rstd = 1 / xp_of(x).sqrt(var + eps)
    return mean, rstd.astype(x.dtype, copy=False)


def _tensor_moments(x: Tensor, axes: tuple, inv_n: float, eps: float):
    """``_moments`` with differentiable ops, for the backward of a backward."""
    mean = x.sum(axis=axes, keepdims=True) * inv_n
    d = x - mean
    return mean, ((d * d).sum(axis=axes, keepdims=True) * inv_n + eps) ** -0.5


def _xhat_grad(gx, xhat, rstd, axes: tuple, inv_n: float):
    """The gradient reaching x through xhat = (x - mean) * rstd, given ``gx``, the gradient of xhat, per group:
    rstd * (gx - mean(gx) - xhat * mean(gx * xhat))."""
    gsum = gx.sum(axis=axes, keepdims=True) * inv_n
    proj = (gx * xhat).sum(axis=axes, keepdims=True) * inv_n
    return (gx - gsum - xhat * proj) * rstd


def _check_param_dtypes(input: Tensor, params: tuple) -> None:
    """PyTorch's rule: parameters share the input's dtype, or are float32 for a float16 input."""
    given = [p for p in params if p is not None]
    if not given:
        return
    if given[0].dtype != input.dtype:
        if any(p._data.dtype != np.float32 for p in given):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        if input._data.dtype != np.float16:
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
        return
    for p in given[1:]:
        if p.dtype != input.dtype:
            raise RuntimeError(
                f"expected scalar type {_scalar_name(input._data.dtype)} but found {_scalar_name(p._data.dtype)}"
            )


def _check_floating(input: Tensor, kernel: str) -> None:
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_scalar_name(input._data.dtype)}\'')


# --------------------------------------------------------------------------------------------------- layer norm
class LayerNorm(Op, name="NativeLayerNormBackward0"):
    """Over the last ``ndim`` dimensions (n values per row):  out = xhat * w + b.
    dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) with gw = g * w,  dw = sum(g * xhat),  db = sum(g), the
    last two summed over the leading (row) dimensions."""

    save_inputs = (0, 1)
    save_only_for = {1: 0}

    def forward(self, x, weight, bias, ndim, eps):
        self.axes = tuple(range(x.ndim - ndim, x.ndim))
        self.lead = tuple(range(x.ndim - ndim))
        n = math.prod(x.shape[x.ndim - ndim:])
        self.inv_n, self.eps = (1 / n if n else 0.0), eps
        xc = _compute_dtype(x)
        mean, rstd = _moments(xc, self.axes, self.inv_n, eps)
        self.extra = (mean, rstd)
        out = xc - mean  # a fresh array: finish it in place
        with np.errstate(invalid="ignore"):
            out *= rstd
        if weight is not None:
            out *= weight
        if bias is not None:
            out += bias
        return out.astype(x.dtype, copy=False)

    def backward(self, g):
        x, weight = self.saved_tensors
        (fx, _), (fw, _), (fb, _) = self.next_functions
        if isinstance(x, Tensor):  # create_graph: the statistics are functions of x
            mean, rstd = _tensor_moments(x, self.axes, self.inv_n, self.eps)
        else:
            mean, rstd = self.extra
        xhat = (x - mean) * rstd if fx is not None or fw is not None else None
        dx = dw = db = None
        if fx is not None:
            dx = _xhat_grad(g if weight is None else g * weight, xhat, rstd, self.axes, self.inv_n)
        if fw is not None:
            dw = _sum_over(g * xhat, self.lead)
        if fb is not None:
            db = _sum_over(g, self.lead)
        return dx, dw, db


def _sum_over(v, axes: tuple):
    # a Tensor's sum over no axes would sum everything, as in PyTorch
    return v.sum(axis=axes) if axes else v


def _shape_tuple(normalized_shape) -> tuple:
    if isinstance(normalized_shape, numbers.Integral) or not isinstance(normalized_shape, Sequence):
        raise TypeError(
            "layer_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not "
            f"{type(normalized_shape).__name__}"
        )
    for pos, n in enumerate(normalized_shape):
        if not isinstance(n, numbers.Integral):
            raise TypeError(
                "layer_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, but found element of "
                f"type {type(n).__name__} at pos {pos}"
            )
    return tuple(operator.index(n) for n in normalized_shape)


def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last ``len(normalized_shape)`` dimensions to zero mean and unit (biased) variance, then
    multiply by ``weight`` and add ``bias`` (both of shape ``normalized_shape``).

    >>> import trainkit
    >>> layer_norm(trainkit.tensor([[1.0, 3.0], [0.0, 4.0]]), (2,), eps=0.0)
    tensor([[-1.,  1.],
            [-1.,  1.]])
    """
    shape = _shape_tuple(normalized_shape)
    _check_param_dtypes(input, (weight, bias))
    if not shape:
        raise RuntimeError(
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got "
            f"normalized_shape = {list(shape)}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape {list(t.shape)} "
                f"and normalized_shape = {list(shape)}"
            )
    k = len(shape)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape [*, {', '.join(map(str, shape))}], "
            f"but got input of size{list(input.shape)}"
        )
    _check_floating(input, "LayerNormKernelImpl")
    return LayerNorm.apply(input, weight, bias, ndim=k, eps=eps)


# --------------------------------------------------------------------------------------------------- group norm
class GroupNorm(Op, name="NativeGroupNormBackward0"):
    """x (N, C, *) viewed as (N, G, n): each group of C / G channels normalised over its n values, then
    out = xhat * w[c] + b[c].   dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) per group with gw = g * w,
    dw = sum(g * xhat),  db = sum(g), summed over every dimension but the channels."""

    save_inputs = (0, 1)
    save_only_for = {1: 0}

    def forward(self, x, weight, bias, groups, eps):
        n = (x.shape[1] // groups) * math.prod(x.shape[2:])
        self.grouped = (x.shape[0], groups, n)
        self.channel_shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        self.channel_sums = (0,) + tuple(range(2, x.ndim))
        self.inv_n, self.eps = (1 / n if n else 0.0), eps
        xr = _compute_dtype(x).reshape(self.grouped)
        mean, rstd = _moments(xr, (2,), self.inv_n, eps)
        self.extra = (mean, rstd)
        out = xr - mean
        with np.errstate(invalid="ignore"):
            out *= rstd
        out = out.reshape(x.shape)
        if weight is not None:
            out *= weight.reshape(self.channel_shape)
        if bias is not None:
            out += bias.reshape(self.channel_shape)
        return out.astype(x.dtype, copy=False)

    def backward(self, g):
        x, weight = self.saved_tensors
        (fx, _), (fw, _), (fb, _) = self.next_functions
        xr = x.reshape(self.grouped)
        if isinstance(x, Tensor):
            mean, rstd = _tensor_moments(xr, (2,), self.inv_n, self.eps)
        else:
            mean, rstd = self.extra
        xhat = (xr - mean) * rstd if fx is not None or fw is not None else None
        dx = dw = db = None
        if fx is not None:
            gw = g if weight is None else g * weight.reshape(self.channel_shape)
            dx = _xhat_grad(gw.reshape(self.grouped), xhat, rstd, (2,), self.inv_n).reshape(tuple(x.shape))
        if fw is not None:
            dw = (g * xhat.reshape(tuple(x.shape))).sum(axis=self.channel_sums)
        if fb is not None:
            db = g.sum(axis=self.channel_sums)
        return dx, dw, db


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Split the channels (dimension 1) of a (N, C, *) input into ``num_groups`` groups and normalise each group of
    each sample to zero mean and unit (biased) variance, then scale by ``weight`` and shift by ``bias`` (one value
    per channel).

    >>> import trainkit
    >>> x = trainkit.tensor([[[1.0], [3.0], [2.0], [6.0]]])
    >>> group_norm(x, 2, eps=0.0).flatten()
    tensor([-1.,  1., -1.,  1.])
    """
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    size = [input.shape[0] * input.shape[1] // num_groups, num_groups] + list(input.shape[2:])
    if size[0] * math.prod(size[2:]) == 1:  # PyTorch leaves the group count out of this product
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
    if num_groups <= 0:
        raise RuntimeError(f"Expected num groups to be greater than 0, got {num_groups}")
    channels = input.shape[1]
    if channels % num_groups:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got input of shape "
            f"{list(input.shape)} and num_groups={num_groups}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != channels):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in input, but got {name} of "
                f"shape {list(t.shape)} and input of shape {list(input.shape)}"
            )
    _check_param_dtypes(input, (weight, bias))
    _check_floating(input, "GroupNormKernelImpl")
    return GroupNorm.apply(input, weight, bias, groups=num_groups, eps=eps)


# ---------------------------------------------------------------------------------------------- channel dropout
def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, lead: int = 2) -> Tensor:
    """Multiply by a mask drawn once per index of the first ``lead`` dimensions (the channels of each sample)."""
    if not training or p == 0.0:
        return input
    if input.ndim + 2 - lead < 2:  # lead=1 stands for a batch dimension of one in front
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    data = input._data
    xp = xp_of(data)
    shape = tuple(data.shape[:lead]) + (1,) * (data.ndim - lead)
    if p == 1.0:
        mask = xp.zeros(shape, dtype=data.dtype)
    else:
        if data.dtype.kind != "f":
            raise RuntimeError(f"result type Float can't be cast to the desired output type {_scalar_name(data.dtype)}")
        draw_dtype = np.float64 if data.dtype == np.float64 else np.float32
        with on_device(input.device):
            u = generator_for(input.device).rng.random(shape, dtype=draw_dtype)
        mask = (u < 1 - p).astype(data.dtype)
        mask *= 1 / (1 - p)
    mask = Tensor._make(mask)
    return input.mul_(mask) if inplace else tmath.mul(input, mask)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a (N, C, L) or (C, L) input with probability ``p`` and scale the others by
    1 / (1 - p). Masks come from the seeded default generator of ``input``'s device.

    >>> import trainkit
    >>> y = dropout1d(trainkit.ones(1, 4, 3))
    >>> sorted(set(y[0, 0].tolist())) in ([0.0], [2.0])     # a channel is kept or dropped as a whole
    True
    """
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that dropout1d exists to "
            "provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an optional "
            "batch dimension (i.e. 2D or 3D inputs)."
        )
    if input.ndim == 3:
        return _feature_dropout(input, p, training, inplace)
    if inplace:  # no in-place unsqueeze here: a (C, 1) mask drops the same channels
        return _feature_dropout(input, p, training, inplace, lead=1)
    return _feature_dropout(input.unsqueeze(0), p, training, inplace).squeeze(0)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a (N, C, H, W) input with probability ``p`` and scale the others by 1 / (1 - p).
    Masks come from the seeded default generator of ``input``'s device.

    As in PyTorch, a 3-D input is taken as (N, C, L) (1-D channel dropout) with a warning, and other ranks warn that
    they are deprecated.

    >>> import trainkit
    >>> y = dropout2d(trainkit.ones(2, 3, 4, 4), p=0.5)
    >>> sorted(set(y.flatten().tolist())) in ([0.0], [2.0], [0.0, 2.0])
    True
    """
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will result in an error "
            "in a future release. To retain the behavior and silence this warning, please use dropout instead. Note "
            "that dropout2d exists to provide channel-wise dropout on inputs with 2 spatial dimensions, a channel "
            "dimension, and an optional batch dimension (i.e. 3D or 4D inputs).",
            stacklevel=2,
        )
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior is "
            "desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior will change "
            "in a future release to interpret the input as one without a batch dimension, i.e. shape (C, H, W). To "
            "maintain the 1D channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2,
        )
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a (N, C, D, H, W) or (C, D, H, W) input with probability ``p`` and scale the others by
    1 / (1 - p). Masks come from the seeded default generator of ``input``'s device. As in PyTorch, other ranks warn
    that they are deprecated and are taken as unbatched (a channel per index of the first dimension).

    >>> import trainkit
    >>> y = dropout3d(trainkit.ones(2, 3, 2, 2, 2))
    >>> all(len(set(y[n, c].flatten().tolist())) == 1 for n in range(2) for c in range(3))  # whole channels
    True
    """
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will result in an error "
            "in a future release. To retain the behavior and silence this warning, please use dropout instead. Note "
            "that dropout3d exists to provide channel-wise dropout on inputs with 3 spatial dimensions, a channel "
            "dimension, and an optional batch dimension (i.e. 4D or 5D inputs).",
            stacklevel=2,
        )
    if input.ndim == 5:
        return _feature_dropout(input, p, training, inplace)
    if inplace:  # as in dropout1d: a mask over the first dimension drops the same channels
        return _feature_dropout(input, p, training, inplace, lead=1)
    return _feature_dropout(input.unsqueeze(0), p, training, inplace).squeeze(0)


__all__ = ["dropout1d", "dropout2d", "dropout3d", "group_norm", "layer_norm"]
