"""Losses with ``torch.nn.functional``'s signatures: mse, l1, huber and smooth_l1; nll, cross_entropy, binary
cross-entropy with and without logits.

Where PyTorch has a node of its own for a loss (``MseLossBackward0``, ``NllLossBackward0``, ...), the loss is one
class here with that name, its forward and a hand-written backward side by side; the rest is composed from existing
ops. Fused ops (cross-entropy is log-softmax and NLL in one) keep only small per-row statistics and recompute the
rest in backward from the saved input. With ``create_graph`` each backward runs on Tensors: values that depend on an
input are then recomputed with differentiable ops, so that second derivatives come out right.

A loss's ``reduction`` is ``'mean'`` (the default), ``'sum'`` or ``'none'`` (one loss per element or sample).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..autograd import grad_mode
from ..autograd.backend import xp_of
from ..autograd.function import Op
from ..autograd.ops import activation, dual
from ..autograd.ops import math as tmath
from ..autograd.ops.shape import index_into_zeros
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor
from .activation import dual_sigmoid
from .reduction import check_reduction, reduce_loss, unreduce_grad

__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "huber_loss", "l1_loss",
    "mse_loss", "nll_loss", "smooth_l1_loss"
]


def _warn_if_broadcast(input: Tensor, target: Tensor) -> None:
    if target._data.shape != input._data.shape:
        warnings.warn(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}). This will "
            "likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            stacklevel=3,
        )


def _like(t: Tensor | None, input: Tensor) -> Tensor | None:
    """``t`` in ``input``'s floating dtype (a differentiable cast), or None."""
    if t is None or t.dtype == input.dtype:
        return t
    return t.to(input.dtype)


def _softplus_neg(v):
    """log(1 + e^-v) = max(-v, 0) + log(1 + e^-|v|), without overflow."""
    if isinstance(v, Tensor):
        return (-v).clip(0, None) + dual.log(1 + dual.exp(-abs(v)))
    xp = xp_of(v)
    return xp.maximum(-v, 0) + xp.log1p(xp.exp(-xp.abs(v)))


# ---------------------------------------------------------------------------------------------------- regression losses
class PointwiseLoss(Op):
    """Base of the losses of d = input - target, element by element: ``loss(d)``, reduced, and its ``slope(d)``.
    dinput = slope(d) * g,  dtarget = -dinput."""

    save_inputs = (0, 1)

    def forward(self, x, y, reduction, param):
        self.reduction, self.param = reduction, param
        d = x - y
        self.count = d.size
        return reduce_loss(self.loss(d, param), reduction)

    def backward(self, g):
        x, y = self.saved_tensors
        gd = self.slope(x - y, self.param) * unreduce_grad(g, self.reduction, self.count)
        (fx, _), (fy, _) = self.next_functions
        return (gd if fx is not None else None), (-gd if fy is not None else None)


class MseLoss(PointwiseLoss, name="MseLossBackward0"):
    """loss = d^2.   slope = 2 d."""

    kernel = "mse_cpu"

    @staticmethod
    def loss(d, param):
        return d * d

    @staticmethod
    def slope(d, param):
        return 2 * d


class HuberLoss(PointwiseLoss, name="HuberLossBackward0"):
    """loss = d^2 / 2 where |d| < delta, else delta (|d| - delta / 2).   slope = d clipped to [-delta, delta]."""

    kernel = "huber_cpu"

    @staticmethod
    def loss(d, delta):
        a = xp_of(d).abs(d)
        return xp_of(d).where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))

    @staticmethod
    def slope(d, delta):
        return d.clip(-delta, delta)


class SmoothL1Loss(PointwiseLoss, name="SmoothL1LossBackward0"):
    """loss = d^2 / (2 beta) where |d| < beta, else |d| - beta / 2.   slope = d / beta clipped to [-1, 1]."""

    kernel = "smooth_l1_cpu"

    @staticmethod
    def loss(d, beta):
        a = xp_of(d).abs(d)
        return xp_of(d).where(a < beta, 0.5 * d * d / beta, a - 0.5 * beta)

    @staticmethod
    def slope(d, beta):
        return (d / beta).clip(-1, 1)


def _pointwise(cls, input: Tensor, target: Tensor, reduction: str, param=None) -> Tensor:
    _warn_if_broadcast(input, target)
    x, y = tmath.promote(input, target)
    if x._data.dtype.kind != "f":
        raise NotImplementedError(f'"{cls.kernel}" not implemented for \'{scalar_name(x)}\'')
    return cls.apply(x, y, reduction=reduction, param=param)


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Squared error (input - target)^2, averaged (or summed, or per element).

    >>> import trainkit
    >>> mse_loss(trainkit.tensor([1.0, 2.0]), trainkit.tensor([0.0, 0.0]))
    tensor(2.5000)
    """
    return _pointwise(MseLoss, input, target, check_reduction(reduction, size_average, reduce))


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Absolute error |input - target|, averaged (or summed, or per element); composed of sub, abs and mean/sum.

    >>> import trainkit
    >>> l1_loss(trainkit.tensor([1.0, -3.0]), trainkit.zeros(2))
    tensor(2.)
    """
    reduction = check_reduction(reduction, size_average, reduce)
    _warn_if_broadcast(input, target)
    loss = tmath.abs(tmath.sub(input, target))
    return loss if reduction == "none" else (loss.mean() if reduction == "mean" else loss.sum())


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """Squared error for |d| < delta, delta-scaled absolute error beyond (d = input - target).

    >>> import trainkit
    >>> huber_loss(trainkit.tensor([0.5, 3.0]), trainkit.zeros(2), reduction='none')
    tensor([0.1250, 2.5000])
    """
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _pointwise(HuberLoss, input, target, check_reduction(reduction), delta)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """Squared error divided by 2 beta for |d| < beta, absolute error minus beta/2 beyond; beta = 0 is L1.

    >>> import trainkit
    >>> smooth_l1_loss(trainkit.tensor([0.5, 3.0]), trainkit.zeros(2), reduction='none')
    tensor([0.1250, 2.5000])
    """
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    reduction = check_reduction(reduction, size_average, reduce)
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    return _pointwise(SmoothL1Loss, input, target, reduction, beta)


# --------------------------------------------------------------------------------------- classification losses
def _to_rows(x):
    """(N, C, d1, ...) as (N * d1 * ..., C), classes last; (N, C) as it is; (C,) as (1, C)."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    moved = dual.permute(x, (0,) + tuple(range(2, x.ndim)) + (1,))
    return moved.reshape(-1, x.shape[1])


def _from_rows(rows, shape: tuple):
    """The inverse of ``_to_rows`` for an input of ``shape``."""
    if len(shape) <= 2:
        return rows.reshape(shape)
    moved = rows.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],))
    return dual.permute(moved, (0, len(shape) - 1) + tuple(range(1, len(shape) - 1)))


def _logsumexp_rows(rows):
    """log(sum(e^x)) of each row, kept as a column."""
    xp = xp_of(rows)
    m = rows.max(axis=1, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0)
    return xp.log(xp.exp(rows - m).sum(axis=1, keepdims=True)) + m


def _row_scale(g, reduction: str, count):
    """The gradient of each row's loss, as a column (or a scalar for 'mean' and 'sum')."""
    s = unreduce_grad(g, reduction, count)
    return s.reshape(-1, 1) if reduction == "none" else s


class NllLoss(Op, name="NllLossBackward0"):
    """loss_i = -w[t_i] x[i, t_i] (0 where t_i = ignore_index); 'mean' divides the sum by sum_i w[t_i].
    dx[i, t_i] = -w[t_i] * g_i (g_i: row i's share of the output gradient), 0 elsewhere."""

    def forward(self, x, target, weight, ignore_index, reduction):
        xp = xp_of(x)
        rows = _to_rows(x)
        t, wt = _picked(target, weight, ignore_index, rows.shape[1], x.dtype)
        self.in_shape, self.reduction, self.count = x.shape, reduction, wt.sum()
        self.extra = (t, wt)
        loss = -wt * rows[xp.arange(rows.shape[0]), t]
        return reduce_loss(loss.reshape(target.shape), reduction, self.count)

    def backward(self, g):
        t, wt = self.extra
        m, c = len(t), self.in_shape[1] if len(self.in_shape) > 1 else self.in_shape[0]
        xp = xp_of(t)
        values = -wt * unreduce_grad(g, self.reduction, self.count).reshape(-1)
        if isinstance(values, Tensor):
            rows = index_into_zeros(values, (m, c), (xp.arange(m), t), False)
        else:
            rows = xp.zeros((m, c), dtype=values.dtype)
            rows[xp.arange(m), t] = values
        return _from_rows(rows, self.in_shape)


class NllLoss2d(NllLoss, name="NllLoss2DBackward0"):
    pass


def _picked(target, weight, ignore_index: int, classes: int, dtype):
    """Each row's target class (0 where ignored) and the weight w[t_i] of its term (0 where ignored)."""
    xp = xp_of(target)
    t = target.reshape(-1)
    valid = t != ignore_index
    t = xp.where(valid, t, 0)
    w = xp.ones(classes, dtype=dtype) if weight is None else weight
    return t, xp.where(valid, w[t], 0).astype(dtype, copy=False)


class CrossEntropy(Op, name="NllLossBackward0"):
    """Cross-entropy with class-index targets, log-softmax fused in. With logp = log_softmax(x) over the classes
    and label smoothing e:
        loss_i = -sum_c q_ic logp_ic,   q_ic = (1 - e) w[t_i] [c = t_i] + (e / C) w_c   (q_i = 0 where ignored),
    'mean' divides the sum by sum_i w[t_i].   dx_i = g_i (softmax(x_i) sum_c q_ic - q_i)."""

    save_inputs = (0,)

    def forward(self, x, target, weight, ignore_index, reduction, smoothing):
        xp = xp_of(x)
        rows = _to_rows(x)
        m, c = rows.shape
        t, wt = _picked(target, weight, ignore_index, c, x.dtype)
        lse = _logsumexp_rows(rows)
        loss = wt * (lse[:, 0] - rows[xp.arange(m), t])
        if smoothing:
            w = xp.ones(c, dtype=x.dtype) if weight is None else weight
            # sum_c w_c (lse - x_c) over the kept rows: no full log-softmax array needed
            smooth = (lse[:, 0] * w.sum() - rows @ w) * (target.reshape(-1) != ignore_index)
            loss = (1 - smoothing) * loss + (smoothing / c) * smooth
        self.in_shape, self.reduction, self.smoothing, self.count = x.shape, reduction, smoothing, wt.sum()
        self.extra = (t, wt, lse, weight, target.reshape(-1) != ignore_index)
        return reduce_loss(loss.reshape(target.shape), reduction, self.count)

    def backward(self, g):
        (x,) = self.saved_tensors
        t, wt, lse, weight, valid = self.extra
        rows = _to_rows(x)
        m, c = rows.shape
        xp = xp_of(t)
        p = activation.softmax(rows, 1) if isinstance(rows, Tensor) else xp.exp(rows - lse)
        s = _row_scale(g, self.reduction, self.count)
        e = self.smoothing
        w = xp.ones(c, dtype=wt.dtype) if weight is None else weight
        qsum = ((1 - e) * wt + (e / c) * w.sum() * valid).reshape(-1, 1)
        if isinstance(p, Tensor) or e:
            q = xp.zeros((m, c), dtype=wt.dtype)
            q[xp.arange(m), t] = (1 - e) * wt
            if e:
                q += (e / c) * w * valid.reshape(-1, 1)
            dx = (p * qsum - q) * s
        else:  # the common case in place: subtract the target's weight from its column only
            p *= qsum * s
            p[xp.arange(m), t] -= wt * (s.reshape(-1) if self.reduction == "none" else s)
            dx = p
        return _from_rows(dx, self.in_shape)


class CrossEntropy2d(CrossEntropy, name="NllLoss2DBackward0"):
    pass


class CrossEntropySmooth(CrossEntropy, name="CrossEntropyLossBackward0"):
    """Class-index targets with label smoothing (PyTorch composes it of several nodes; here it is one)."""


class CrossEntropyProbs(Op, name="CrossEntropyLossBackward0"):
    """Cross-entropy with class-probability targets P, log-softmax fused in. With P' = P (1 - e) + e / C:
        loss_i = -sum_c w_c P'_ic logp_ic,   'mean' divides by the number of rows.
    dx_i = g_i (softmax(x_i) sum_c q_ic - q_i) with q = w P',   dP_ic = -g_i (1 - e) w_c logp_ic,
    dw_c = -sum_i g_i P'_ic logp_ic."""

    save_inputs = (0, 1, 2)

    def forward(self, x, target, weight, reduction, smoothing):
        rows = _to_rows(x)
        lse = _logsumexp_rows(rows)
        q = self._smoothed(_to_rows(target), smoothing, rows.shape[1])
        if weight is not None:
            q = q * weight
        loss = -(q * (rows - lse)).sum(axis=1)
        self.in_shape, self.reduction, self.smoothing, self.count = x.shape, reduction, smoothing, rows.shape[0]
        self.extra = lse
        return reduce_loss(loss.reshape(x.shape[:1] + x.shape[2:] if x.ndim > 1 else ()), reduction)

    @staticmethod
    def _smoothed(target_rows, smoothing: float, classes: int):
        return target_rows * (1 - smoothing) + smoothing / classes if smoothing else target_rows

    def backward(self, g):
        x, target, weight = self.saved_tensors
        rows = _to_rows(x)
        logp = activation.log_softmax(rows, 1) if isinstance(rows, Tensor) else rows - self.extra
        s = _row_scale(g, self.reduction, self.count)
        (fx, _), (ft, _), (fw, _) = self.next_functions
        dx = dt = dw = None
        if fx is not None or fw is not None:
            smoothed = self._smoothed(_to_rows(target), self.smoothing, rows.shape[1])
        if fx is not None:
            q = smoothed if weight is None else smoothed * weight
            dx = _from_rows((dual.exp(logp) * q.sum(axis=1, keepdims=True) - q) * s, self.in_shape)
        if ft is not None:
            dlogp = logp if weight is None else logp * weight
            dt = _from_rows(dlogp * (s * -(1 - self.smoothing)), self.in_shape)
        if fw is not None:
            dw = -(smoothed * logp * s).sum(axis=0)
        return dx, dt, dw


def _check_class_target(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int):
    """Validate class-index targets as PyTorch's nll_loss does."""
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    if input.ndim != 1 and (target.ndim == 0 or input.shape[0] != target.shape[0]):
        got = target.shape[0] if target.ndim else 1
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({got}).")
    if input.ndim <= 2 and target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    expected = tuple(input.shape[:1]) + tuple(input.shape[2:])
    if input.ndim > 2 and tuple(target.shape) != expected:
        raise RuntimeError(f"Expected target size {list(expected)}, got {list(target.shape)}")
    if target._data.dtype.kind not in "iu":
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {target.dtype}")
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes but got weight tensor "
            f"of shape: {list(weight.shape)}"
        )
    t = target._data
    bad = ((t < 0) | (t >= classes)) & (t != ignore_index)
    if bad.any():
        raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")


def _class_weight(weight: Tensor | None, input: Tensor, fn: str):
    if weight is None:
        return None
    if weight.requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError(
            f"The function '{fn}' is not differentiable with respect to argument 'weight'. This input cannot have "
            "requires_grad True."
        )
    return weight._data.astype(input._data.dtype, copy=False)


def _by_rank(cls_1d, cls_2d, input: Tensor, target: Tensor, reduction: str, **params) -> Tensor:
    """Run a class-index loss op as PyTorch's nll_loss_nd does: up to 2-D directly, 4-D as 2-D (spatial), and
    other ranks through a (N, C, 1, -1) view whose output is viewed back."""
    if input.ndim <= 2:
        return cls_1d.apply(input, target=target._data, reduction=reduction, **params)
    if input.ndim == 4:
        return cls_2d.apply(input, target=target._data, reduction=reduction, **params)
    n, c = input.shape[0], input.shape[1]
    out = cls_2d.apply(input.reshape(n, c, 1, -1), target=target._data.reshape(n, 1, -1), reduction=reduction,
                       **params)
    return out.reshape(tuple(target.shape)) if reduction == "none" else out


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class-index targets from log-probabilities ``input`` of shape (N, C), (C,) or
    (N, C, d1, ...): -w[t] * input[t], averaged over the total weight of the counted targets.

    >>> import trainkit
    >>> logp = trainkit.tensor([[-0.5, -1.0], [-2.0, -0.1]])
    >>> nll_loss(logp, trainkit.tensor([0, 1]))
    tensor(0.3000)
    """
    reduction = check_reduction(reduction, size_average, reduce)
    _check_class_target(input, target, weight, ignore_index)
    weight = _class_weight(weight, input, "nll_loss_forward")
    return _by_rank(NllLoss, NllLoss2d, input, target, reduction, weight=weight, ignore_index=ignore_index)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy between the softmax of logits ``input`` (N, C), (C,) or (N, C, d1, ...) and ``target``.

    ``target`` holds class indices (shape (N,) or (N, d1, ...), integers) or class probabilities (the shape of
    ``input``, floats). One fused op computes log-softmax and the loss, stably (no exp overflows) and without keeping
    a log-probability array alive. ``label_smoothing`` e mixes the target with the uniform distribution:
    (1 - e) * target + e / C.

    >>> import trainkit
    >>> logits = trainkit.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    >>> cross_entropy(logits, trainkit.tensor([0, 2]))
    tensor(0.6691)
    """
    reduction = check_reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input._data.dtype.kind != "f":
        kind = "lastdim_kernel_impl" if input.ndim <= 2 else "kernel_impl"
        raise NotImplementedError(f'"log_softmax_{kind}" not implemented for \'{scalar_name(input)}\'')
    if input.ndim >= 1 and tuple(input.shape) == tuple(target.shape):
        return _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing)
    _check_class_target(input, target, weight, ignore_index)
    weight = _class_weight(weight, input, "nll_loss_forward")
    params = dict(weight=weight, ignore_index=ignore_index, smoothing=label_smoothing)
    if label_smoothing:
        return _by_rank(CrossEntropySmooth, CrossEntropySmooth, input, target, reduction, **params)
    return _by_rank(CrossEntropy, CrossEntropy2d, input, target, reduction, **params)


def _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing) -> Tensor:
    if not target.is_floating_point():
        raise RuntimeError(f"Expected floating point type for target with class probabilities, got {target.dtype}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes but got weight tensor "
            f"of shape: {list(weight.shape)}"
        )
    x, target = tmath.promote(input, target)
    return CrossEntropyProbs.apply(x, target, _like(weight, x), reduction=reduction, smoothing=label_smoothing)


def _constant_weight(name: str, t: Tensor | None, input: Tensor, fn: str):
    """A weight PyTorch does not differentiate: its array in ``input``'s dtype, after checking its shape."""
    if t is None:
        return None
    if t.requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError(
            f"The function '{fn}' is not differentiable with respect to argument '{name}'. This input cannot have "
            "requires_grad True."
        )
    try:
        shape = np.broadcast_shapes(tuple(t.shape), tuple(input.shape))
    except ValueError:
        shape = None
    if shape != tuple(input.shape):
        raise RuntimeError(
            f"{name} of shape {list(t.shape)} does not broadcast to the input's shape {list(input.shape)}"
        )
    return t._data.astype(input._data.dtype, copy=False)


class BinaryCrossEntropy(Op, name="BinaryCrossEntropyBackward0"):
    """loss = -w (t log x + (1 - t) log(1 - x)), each log clamped at -100 (as PyTorch).
    dx = g w (x - t) / max(x (1 - x), 1e-12),  dt = g w (log(1 - x) - log x)."""

    save_inputs = (0, 1)

    def forward(self, x, t, weight, reduction):
        xp = xp_of(x)
        with np.errstate(divide="ignore"):  # log(0) = -inf, then clamped
            loss = -(t * xp.maximum(xp.log(x), -100) + (1 - t) * xp.maximum(xp.log1p(-x), -100))
        if weight is not None:
            loss *= weight
        self.reduction, self.count, self.weight = reduction, loss.size, weight
        return reduce_loss(loss, reduction)

    def backward(self, g):
        x, t = self.saved_tensors
        (fx, _), (ft, _) = self.next_functions
        s = unreduce_grad(g, self.reduction, self.count)
        if self.weight is not None:
            s = s * self.weight
        dx = s * (x - t) / (x * (1 - x)).clip(1e-12, None) if fx is not None else None
        with np.errstate(divide="ignore"):
            dt = s * (dual.log(1 - x) - dual.log(x)) if ft is not None else None
        return dx, dt


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities ``input`` (in [0, 1]) against ``target`` (in [0, 1]), optionally
    weighted element by element (``weight`` broadcasts; it gets no gradient, as in PyTorch).

    >>> import trainkit
    >>> binary_cross_entropy(trainkit.tensor([0.5, 1.0]), trainkit.tensor([1.0, 0.0]), reduction='none')
    tensor([  0.6931, 100.0000])
    """
    reduction = check_reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}) is "
            "deprecated. Please ensure they have the same size."
        )
    x, t = tmath.promote(input, target)
    weight = _constant_weight("weight", weight, x, "binary_cross_entropy")
    for name, v in (("input", x), ("target", t)):
        if bool(((v._data < 0) | (v._data > 1)).any()):
            raise RuntimeError(f"all elements of {name} should be between 0 and 1")
    return BinaryCrossEntropy.apply(x, t, weight=weight, reduction=reduction)


class BinaryCrossEntropyWithLogits(Op, name="BinaryCrossEntropyWithLogitsBackward0"):
    """With sp = softplus(-x) = log(1 + e^-x) and l = 1 + (pw - 1) t (l = 1 without pos_weight pw):
    loss = w ((1 - t) x + l sp), which is binary cross-entropy of sigmoid(x), computed without overflow.
    dx = g w (l sigmoid(x) - pw t),  dt = g w ((pw - 1) sp - x)."""

    save_inputs = (0, 1)

    def forward(self, x, t, weight, pos_weight, reduction):
        sp = _softplus_neg(x)
        loss = (1 - t) * x + (sp if pos_weight is None else (1 + (pos_weight - 1) * t) * sp)
        if weight is not None:
            loss *= weight
        self.reduction, self.count, self.weight, self.pos_weight = reduction, loss.size, weight, pos_weight
        return reduce_loss(loss, reduction)

    def backward(self, g):
        x, t = self.saved_tensors
        (fx, _), (ft, _) = self.next_functions
        s = unreduce_grad(g, self.reduction, self.count)
        if self.weight is not None:
            s = s * self.weight
        pw = self.pos_weight
        dx = dt = None
        if fx is not None:
            dx = s * (dual_sigmoid(x) - t) if pw is None else s * ((1 + (pw - 1) * t) * dual_sigmoid(x) - pw * t)
        if ft is not None:
            dt = -s * x if pw is None else s * ((pw - 1) * _softplus_neg(x) - x)
        return dx, dt


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy of sigmoid(input) against ``target``, in one numerically stable op.

    ``pos_weight`` (broadcast against the input, usually one per class) weighs the positive term; neither it nor
    ``weight`` gets a gradient, as in PyTorch.

    >>> import trainkit
    >>> binary_cross_entropy_with_logits(trainkit.tensor([0.0, 100.0]), trainkit.tensor([1.0, 0.0]), reduction='none')
    tensor([  0.6931, 100.0000])
    """
    reduction = check_reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    x, t = tmath.promote(input, target)
    fn = "binary_cross_entropy_with_logits"
    weight = _constant_weight("weight", weight, x, fn)
    pos_weight = _constant_weight("pos_weight", pos_weight, x, fn)
    return BinaryCrossEntropyWithLogits.apply(x, t, weight=weight, pos_weight=pos_weight, reduction=reduction)
