"""Losses with ``torch.nn.functional``'s signatures: mse, l1, huber and smooth_l1; binary cross-entropy with and
without logits (nll and cross_entropy live in ``classification`` and are re-exported here).

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
from ..autograd.ops import dual
from ..autograd.ops import math as tmath
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor
from .activation import dual_sigmoid
from .classification import cross_entropy, nll_loss
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


# ------------------------------------------------------------------------------------- binary cross-entropy
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
