"""Batch, layer and group normalisation: ``F.batch_norm``, ``F.layer_norm`` and ``F.group_norm``.

Each is one node, named as PyTorch names it (``NativeBatchNormBackward0``, ``NativeLayerNormBackward0``,
``NativeGroupNormBackward0``), with a hand-written backward. Each normalises groups of n values (per channel over the
batch for batch norm, per sample for the other two) to xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps) (the
biased variance), then scales and shifts by ``weight`` and ``bias``. Layer and group statistics are computed in the
input's dtype (float16 inputs in float32, as PyTorch accumulates them). With ``create_graph`` the backward recomputes
the statistics from the input with differentiable ops, so that second derivatives come out right.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence

import numpy as np

from ..autograd.backend import BFLOAT16_NP, kind_of, xp_of
from ..autograd.function import Op
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor

__all__ = ["batch_norm", "group_norm", "layer_norm"]

_HALVES = (np.dtype(np.float16), BFLOAT16_NP)  # computed in float32


def _compute_dtype(x):
    """float16 and bfloat16 are normalised in float32: their sums would lose too much, and PyTorch accumulates them
    in float too."""
    return x.astype(np.float32) if x.dtype in _HALVES else x


def _moments(x, axes: tuple, inv_n: float, eps: float):
    """Mean and 1 / sqrt(biased var + eps) of the array ``x`` over ``axes`` (kept as size-1 dimensions).

    Sums times 1/n rather than ``mean``, so that an empty group gives no warning (its output is empty anyway)."""
    mean = x.sum(axis=axes, keepdims=True) * inv_n
    d = x - mean
    with np.errstate(over="ignore", invalid="ignore"):
        var = (d * d).sum(axis=axes, keepdims=True) * inv_n
    return mean, _rstd(x, mean, var, axes, eps)


def _rstd(x, mean, var, axes: tuple, eps: float):
    """1 / sqrt(var + eps), nan where PyTorch's one-pass (Welford) statistics turn nan: where the mean's square
    overflows, or where the values are so far apart that a step between them overflows (two passes would give a
    finite answer there)."""
    xp = xp_of(x)
    with np.errstate(over="ignore", invalid="ignore"):
        lost = ~xp.isfinite(mean * mean)
        wide = ~xp.isfinite(var)
        if wide.any():
            lost |= wide & ~xp.isfinite(x.max(axis=axes, keepdims=True) - x.min(axis=axes, keepdims=True))
    with np.errstate(divide="ignore"):  # eps = 0 on a constant group: rstd = inf, out = nan, as in PyTorch
        rstd = 1 / xp.sqrt(var + eps)
    if lost.any():
        rstd = xp.where(lost, xp.nan, rstd)
    return rstd.astype(x.dtype, copy=False)


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
    """PyTorch's rule: parameters share the input's dtype, or are float32 for a float16 or bfloat16 input."""
    given = [p for p in params if p is not None]
    if not given:
        return
    if given[0].dtype != input.dtype:
        if any(p._data.dtype != np.float32 for p in given):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        if input._data.dtype not in _HALVES:
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
        return
    for p in given[1:]:
        if p.dtype != input.dtype:
            raise RuntimeError(
                f"expected scalar type {scalar_name(input._data.dtype)} but found {scalar_name(p._data.dtype)}"
            )


def _check_floating(input: Tensor, kernel: str) -> None:
    if kind_of(input._data.dtype) != "f":
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{scalar_name(input._data.dtype)}'")


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
        n = math.prod(x.shape[x.ndim - ndim :])
        self.inv_n, self.eps = (1 / n if n else 0.0), eps
        xc = _compute_dtype(x)
        if xp_of(x) is np and n and x.flags.c_contiguous:
            # rows of n values: the centred rows become the output in place, their squares summed by einsum (no
            # temporary), so one array is made where the general path makes three
            rows = xc.reshape(-1, n)
            mean = rows.sum(axis=1, keepdims=True) * self.inv_n
            out = rows - mean
            with np.errstate(over="ignore", invalid="ignore"):
                var = np.einsum("ij,ij->i", out, out)[:, None] * self.inv_n
            rstd = _rstd(rows, mean, var, (1,), eps)
            shape = x.shape[: x.ndim - ndim] + (1,) * ndim
            mean, rstd, out = mean.reshape(shape), rstd.reshape(shape), out.reshape(x.shape)
        else:
            mean, rstd = _moments(xc, self.axes, self.inv_n, eps)
            out = xc - mean  # a fresh array: finish it in place
        self.extra = (mean, rstd)
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
            if xp_of(x) is np and x.flags.c_contiguous and self.inv_n and x.dtype not in _HALVES:
                return _layer_norm_rows_backward(
                    g, x, weight, mean, rstd, x.shape[len(self.lead) :], fx is not None, fw is not None, fb is not None
                )
        xhat = (x - mean) * rstd if fx is not None or fw is not None else None
        dx = dw = db = None
        if fx is not None:
            dx = _xhat_grad(g if weight is None else g * weight, xhat, rstd, self.axes, self.inv_n)
        if fw is not None:
            dw = _sum_over(g * xhat, self.lead)
        if fb is not None:
            db = _sum_over(g, self.lead)
        return dx, dw, db


def _layer_norm_rows_backward(g, x, weight, mean, rstd, shape: tuple, want_x: bool, want_w: bool, want_b: bool):
    """LayerNorm's backward on NumPy rows of n values, with two new arrays where the general formulas make seven:
    the row sums of products by einsum (no temporary), the other steps in place."""
    n = math.prod(shape)
    inv_n = 1 / n
    rows, g2 = x.reshape(-1, n), np.ascontiguousarray(g).reshape(-1, n)
    mean, rstd = mean.reshape(-1, 1), rstd.reshape(-1, 1)
    with np.errstate(invalid="ignore", over="ignore"):
        xhat = rows - mean
        xhat *= rstd
        dx = dw = db = None
        if want_w:
            dw = np.einsum("ij,ij->j", g2, xhat).reshape(shape)
        if want_b:
            db = g2.sum(axis=0).reshape(shape)
        if want_x:
            gw = g2 * weight.reshape(-1) if weight is not None else g2.copy()
            proj = np.einsum("ij,ij->i", gw, xhat)[:, None]
            proj *= inv_n
            gsum = gw.sum(axis=1, keepdims=True)
            gsum *= inv_n
            xhat *= proj  # xhat is not needed any more: it becomes xhat * mean(gw * xhat)
            gw -= gsum
            gw -= xhat
            gw *= rstd
            dx = gw.reshape(x.shape)
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


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
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
    if input.ndim < k or tuple(input.shape[input.ndim - k :]) != shape:
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


def group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
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


# ----------------------------------------------------------------------------------------------------------- batch norm
class BatchNorm(Op, name="NativeBatchNormBackward0"):
    """Per channel (dimension 1), over the other dimensions (n values):
    out = w * xhat + b, xhat = (x - mean) * invstd, invstd = 1 / sqrt(var + eps).
    Training: mean and (biased) var of the batch, and with dotp = sum(g * (x - mean)),
        dx = w * invstd * (g - sum(g) / n - (x - mean) * dotp * invstd^2 / n).
    Evaluation: the running statistics, constants:  dx = g * w * invstd.
    Both:  dw = dotp * invstd (= sum(g * xhat)),  db = sum(g)."""

    save_inputs = (0, 1)

    def forward(self, x, weight, bias, running_mean, running_var, training, momentum, eps):
        xp = xp_of(x)
        self.axes = (0,) + tuple(range(2, x.ndim))
        self.shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        self.training, self.eps, self.n = training, eps, x.size // x.shape[1]
        if training:
            mean = x.mean(axis=self.axes, keepdims=True)
            xc = x - mean
            var = (xc * xc).mean(axis=self.axes)
            n = self.n
            if running_mean is not None:  # updated in place, with the unbiased variance, as PyTorch does
                running_mean *= 1 - momentum
                running_mean += momentum * mean.reshape(-1)
            if running_var is not None:
                running_var *= 1 - momentum
                running_var += (momentum * n / (n - 1)) * var
        else:
            mean = running_mean.reshape(self.shape).copy()  # copies: later updates must not reach this backward
            xc = x - mean
            var = running_var
        invstd = (1 / xp.sqrt(var + eps)).astype(x.dtype, copy=False).reshape(self.shape)
        self.extra = (mean, invstd)
        out = xc  # a fresh array: normalise it in place
        out *= invstd
        if weight is not None:
            out *= weight.reshape(self.shape)
        if bias is not None:
            out += bias.reshape(self.shape)
        return out

    def backward(self, g):
        x, weight = self.saved_tensors
        (fx, _), (fw, _), (fb, _) = self.next_functions
        axes, n = self.axes, self.n
        if self.training and isinstance(x, Tensor):
            # with create_graph the batch statistics are functions of x: recompute them differentiably
            xc = x - x.mean(axis=axes, keepdims=True)
            invstd = ((xc * xc).mean(axis=axes, keepdims=True) + self.eps) ** -0.5
        else:
            mean, invstd = self.extra
            xc = None
        batch_dx = fx is not None and self.training
        gsum = g.sum(axis=axes, keepdims=True) if fb is not None or batch_dx else None
        # PyTorch's order: dotp = sum(g (x - mean)) first, scaled by invstd after, so that an overflowing dotp (or a
        # zero invstd) gives the same nan or zero there and here
        dotp = None
        if fw is not None or batch_dx:
            if xc is None:
                xc = x - mean
            dotp = (g * xc).sum(axis=axes, keepdims=True)
        dx = None
        if fx is not None:
            scale = invstd if weight is None else invstd * weight.reshape(self.shape)
            dx = (g - gsum / n - xc * (dotp * invstd * invstd / n)) * scale if self.training else g * scale
        dw = (dotp * invstd).reshape(-1) if fw is not None else None
        return dx, dw, (gsum.reshape(-1) if fb is not None else None)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise each channel (dimension 1) of a (N, C, ...) input to zero mean and unit variance, then scale by
    ``weight`` and shift by ``bias``.

    In training the batch's statistics are used and the running ones updated in place:
    running = (1 - momentum) * running + momentum * batch (the unbiased variance for ``running_var``). Otherwise the
    running statistics normalise.

    >>> import trainkit
    >>> x = trainkit.tensor([[1.0], [3.0]])
    >>> mean, var = trainkit.zeros(1), trainkit.ones(1)
    >>> batch_norm(x, mean, var, training=True, eps=0.0)
    tensor([[-1.],
            [ 1.]])
    >>> mean, var
    (tensor([0.2000]), tensor([1.1000]))
    """
    if input.ndim < 2:
        raise ValueError(f"Expected 2D or higher input (got {input.ndim}D input)")
    channels = input.shape[1]
    if training and input.numel() // max(channels, 1) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.size()}")
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("running_mean must be defined in evaluation mode")
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
    _check_param_dtypes(input, (weight, bias, running_mean, running_var))
    out = BatchNorm.apply(
        input,
        weight,
        bias,
        running_mean=None if running_mean is None else running_mean._data,
        running_var=None if running_var is None else running_var._data,
        training=training,
        momentum=momentum,
        eps=eps,
    )
    if training:
        for t in (running_mean, running_var):
            if t is not None:
                t._version_counter[0] += 1
    return out
