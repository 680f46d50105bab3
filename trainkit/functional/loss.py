"""Losses with ``torch.nn.functional``'s signatures: mse, l1, huber and smooth_l1; binary cross-entropy with and
without logits; the Kullback-Leibler divergence (nll and cross_entropy live in ``classification`` and are
re-exported here).

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

from ..autograd.autocast import autocast_inputs, enabled_threads
from ..autograd.backend import FLOAT32_NP, kind_of, xp_of
from ..autograd.function import Op, shape_error
from ..autograd.ops import dual
from ..autograd.ops import math as tmath
from ..autograd.ops.more_math import xlogy
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor
from .activation import dual_sigmoid
from .classification import cross_entropy, nll_loss
from .reduction import check_reduction, reduce_loss, refuse_grad, unreduce_grad

__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "mse_loss",
    "nll_loss",
    "smooth_l1_loss",
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

    def forward(self, x, y, reduction, param, dtype=None):
        self.reduction, self.param = reduction, param
        d = x - y
        self.count = d.size
        loss = self.loss(d, param)
        return reduce_loss(loss if dtype is None else loss.astype(dtype, copy=False), reduction)

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

    def backward(self, g):
        x, y = self.saved_tensors
        # the factor 2 / count first, as PyTorch does: 2 d alone overflows for d near the dtype's largest value
        norm = (2 / self.count if self.count else 0) if self.reduction == "mean" else 2
        gd = norm * (x - y) * g
        (fx, _), (fy, _) = self.next_functions
        return (gd if fx is not None else None), (-gd if fy is not None else None)


class HuberLoss(PointwiseLoss, name="HuberLossBackward0"):
    """loss = d^2 / 2 where |d| < delta, else delta (|d| - delta / 2).   slope = d clipped to [-delta, delta].

    Input and target of two dtypes give a loss but no gradient, as in PyTorch (its backward kernel takes one).
    """

    kernel = "huber_cpu"

    def forward(self, x, y, reduction, param, dtype=None, dtypes=None):
        self.dtypes = dtypes
        return super().forward(x, y, reduction, param, dtype)

    def backward(self, g):
        if self.dtypes is not None:
            input_dtype, target_dtype = self.dtypes
            (fx, _), _ = self.next_functions
            found, expected = (target_dtype, input_dtype) if fx is not None else (input_dtype, target_dtype)
            raise RuntimeError(
                f"Found dtype {found} but expected {expected}: huber_loss differentiates an input and a target of "
                "one dtype only (convert one of them, e.g. target.to(input.dtype))"
            )
        return super().backward(g)

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


def _check_broadcast(name: str, input: Tensor, target: Tensor) -> None:
    """PyTorch broadcasts input and target before it reads ``reduction``: a shape error comes first."""
    try:
        np.broadcast_shapes(tuple(input.shape), tuple(target.shape))
    except ValueError as err:
        raise shape_error(name, (input._data, target._data), err) from None


def _pointwise(
    cls, input: Tensor, target: Tensor, reduction: str, param=None, keep_dtype: bool = False, **extra
) -> Tensor:
    """``keep_dtype``: the loss has the input's dtype whatever the target's (PyTorch's huber_loss writes into a
    tensor like the input), computed in the promoted one."""
    x, y = tmath.promote(input, target)
    if x._data.dtype is not FLOAT32_NP and kind_of(x._data.dtype) != "f":
        raise NotImplementedError(f"\"{cls.kernel}\" not implemented for '{scalar_name(x)}'")
    dtype = None
    if keep_dtype and input._data.dtype != x._data.dtype:
        if kind_of(input._data.dtype) != "f":
            raise RuntimeError(
                f"result type {scalar_name(x)} can't be cast to the desired output type {scalar_name(input)}: "
                f"pass a floating-point input (input.to({x.dtype}))"
            )
        dtype = input._data.dtype
    return cls.apply(x, y, reduction=reduction, param=param, dtype=dtype, **extra)


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Squared error (input - target)^2, averaged (or summed, or per element).

    >>> import trainkit
    >>> mse_loss(trainkit.tensor([1.0, 2.0]), trainkit.tensor([0.0, 0.0]))
    tensor(2.5000)
    """
    if enabled_threads:  # only while some thread has autocast on
        input, target = autocast_inputs("mse_loss", input, target)
    _warn_if_broadcast(input, target)
    _check_broadcast("mse_loss", input, target)
    return _pointwise(MseLoss, input, target, check_reduction(reduction, size_average, reduce))


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Absolute error |input - target|, averaged (or summed, or per element); composed of sub, abs and mean/sum.

    >>> import trainkit
    >>> l1_loss(trainkit.tensor([1.0, -3.0]), trainkit.zeros(2))
    tensor(2.)
    """
    if enabled_threads:  # only while some thread has autocast on
        input, target = autocast_inputs("l1_loss", input, target)
    _warn_if_broadcast(input, target)
    _check_broadcast("l1_loss", input, target)
    reduction = check_reduction(reduction, size_average, reduce)
    loss = tmath.abs(tmath.sub(input, target))
    return loss if reduction == "none" else (loss.mean() if reduction == "mean" else loss.sum())


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """Squared error for |d| < delta, delta-scaled absolute error beyond (d = input - target).

    >>> import trainkit
    >>> huber_loss(trainkit.tensor([0.5, 3.0]), trainkit.zeros(2), reduction='none')
    tensor([0.1250, 2.5000])
    """
    if enabled_threads:  # only while some thread has autocast on
        input, target = autocast_inputs("huber_loss", input, target)
    _warn_if_broadcast(input, target)
    _check_broadcast("huber_loss", input, target)
    reduction = check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    mixed = input._data.dtype != target._data.dtype
    dtypes = (scalar_name(input), scalar_name(target)) if mixed else None
    return _pointwise(HuberLoss, input, target, reduction, delta, keep_dtype=True, dtypes=dtypes)


def smooth_l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    """Squared error divided by 2 beta for |d| < beta, absolute error minus beta/2 beyond; beta = 0 is L1.

    >>> import trainkit
    >>> smooth_l1_loss(trainkit.tensor([0.5, 3.0]), trainkit.zeros(2), reduction='none')
    tensor([0.1250, 2.5000])
    """
    if enabled_threads:  # only while some thread has autocast on
        input, target = autocast_inputs("smooth_l1_loss", input, target)
    _warn_if_broadcast(input, target)
    _check_broadcast("smooth_l1_loss", input, target)
    reduction = check_reduction(reduction, size_average, reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0.0:
        with warnings.catch_warnings():  # warned above already
            warnings.simplefilter("ignore")
            return l1_loss(input, target, reduction=reduction)
    return _pointwise(SmoothL1Loss, input, target, reduction, beta)


# ------------------------------------------------------------------------------------- binary cross-entropy
def _constant_weight(name: str, t: Tensor | None, input: Tensor, fn: str):
    """A weight PyTorch does not differentiate: its array in ``input``'s dtype, after checking its shape."""
    if t is None:
        return None
    refuse_grad(t, name, fn)
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


def binary_cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """Binary cross-entropy of probabilities ``input`` (in [0, 1]) against ``target`` (in [0, 1]), optionally
    weighted element by element (``weight`` broadcasts; it gets no gradient, as in PyTorch).

    >>> import trainkit
    >>> binary_cross_entropy(trainkit.tensor([0.5, 1.0]), trainkit.tensor([1.0, 0.0]), reduction='none')
    tensor([  0.6931, 100.0000])
    """
    if enabled_threads:  # only while some thread has autocast on
        input, target, weight = autocast_inputs("binary_cross_entropy", input, target, weight)
    reduction = check_reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}) is "
            "deprecated. Please ensure they have the same size."
        )
    if target._data.dtype != input._data.dtype:
        raise RuntimeError(
            f"Found dtype {scalar_name(target)} but expected {scalar_name(input)}: binary_cross_entropy needs a "
            f"target of the input's dtype (target.to({input.dtype}))"
        )
    x, t = input, target
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

    def forward(self, x, t, weight, pos_weight, reduction, dtype=None):
        sp = _softplus_neg(x)
        loss = (1 - t) * x + (sp if pos_weight is None else (1 + (pos_weight - 1) * t) * sp)
        if dtype is not None:
            loss = loss.astype(dtype)
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


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross-entropy of sigmoid(input) against ``target``, in one numerically stable op.

    ``pos_weight`` (broadcast against the input, usually one per class) weighs the positive term; neither it nor
    ``weight`` gets a gradient, as in PyTorch.

    >>> import trainkit
    >>> binary_cross_entropy_with_logits(trainkit.tensor([0.0, 100.0]), trainkit.tensor([1.0, 0.0]), reduction='none')
    tensor([  0.6931, 100.0000])
    """
    if enabled_threads:  # only while some thread has autocast on
        input, target, weight, pos_weight = autocast_inputs(
            "binary_cross_entropy_with_logits", input, target, weight, pos_weight
        )
    reduction = check_reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    # PyTorch computes 1 - target (and pos_weight - 1 before it) and writes the loss into that tensor: a bool
    # operand cannot be subtracted, and the loss takes the target's dtype
    for name, v in (("pos_weight", pos_weight), ("target", target)):
        if v is not None and v._data.dtype == np.bool_:
            raise RuntimeError(
                f"Subtraction, the `-` operator, with a bool tensor is not supported: binary_cross_entropy_with_logits "
                f"needs a floating-point {name} ({name}.float())"
            )
    x, t = tmath.promote(input, target)
    dtype = None
    if target._data.dtype != x._data.dtype:
        if kind_of(target._data.dtype) != "f":
            raise RuntimeError(
                f"result type {scalar_name(x)} can't be cast to the desired output type {scalar_name(target)}: "
                f"binary_cross_entropy_with_logits needs a floating-point target (target.to({x.dtype}))"
            )
        dtype = target._data.dtype
    fn = "binary_cross_entropy_with_logits"
    weight = _constant_weight("weight", weight, x, fn)
    pos_weight = _constant_weight("pos_weight", pos_weight, x, fn)
    return BinaryCrossEntropyWithLogits.apply(
        x, t, weight=weight, pos_weight=pos_weight, reduction=reduction, dtype=dtype
    )


# ----------------------------------------------------------------------------------------- Kullback-Leibler
KL_MEAN_WARNING = (
    "reduction: 'mean' divides the total loss by both the batch size and the support size."
    "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
    "'mean' will be changed to behave the same as 'batchmean' in the next major release."
)


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """The Kullback-Leibler divergence of ``target`` from the distribution whose log-probabilities are ``input``:
    target * (log(target) - input) element by element, 0 where target is 0 (``exp(target) * (target - input)``
    with ``log_target=True``, for a target given as log-probabilities).

    ``reduction``: ``'batchmean'`` (the sum divided by the batch size, ``input.shape[0]``: the divergence per
    sample), ``'sum'``, ``'none'``, or ``'mean'`` (the default, dividing by the number of elements, which warns as
    PyTorch does: it is not the divergence).

    >>> import trainkit
    >>> logp = trainkit.tensor([[0.5, 0.5]]).log()
    >>> kl_div(logp, trainkit.tensor([[1.0, 0.0]]), reduction='batchmean')
    tensor(0.6931)
    """
    if enabled_threads:  # only while some thread has autocast on
        input, target = autocast_inputs("kl_div", input, target)
    given = reduction  # PyTorch divides by the batch size whenever 'batchmean' was asked for, legacy flags or not
    if size_average is not None or reduce is not None:
        reduction = check_reduction(reduction, size_average, reduce)
    else:
        if reduction == "mean":
            warnings.warn(KL_MEAN_WARNING, stacklevel=2)
        if reduction != "batchmean":
            check_reduction(reduction)
    for position, (arg, v) in enumerate((("input", input), ("target", target)), 1):
        if not isinstance(v, Tensor):
            raise TypeError(f"kl_div(): argument '{arg}' (position {position}) must be Tensor, not {type(v).__name__}")
    if kind_of(input._data.dtype) not in "fc" or kind_of(target._data.dtype) not in "fc":
        raise RuntimeError(
            "kl_div: Integral inputs not supported. Pass floating-point log-probabilities and a floating-point "
            f"target (got {scalar_name(input)} and {scalar_name(target)})"
        )
    with np.errstate(invalid="ignore"):  # a target of log 0 = -inf gives 0 * inf = nan, silently as in PyTorch
        if log_target:
            loss = tmath.exp(target) * (target - input)
        else:
            loss = xlogy(target, target) - target * input
    if reduction == "mean":
        loss = loss.mean()
    elif reduction != "none":
        loss = loss.sum()
    if given == "batchmean" and input._data.ndim != 0:
        return loss / input._data.shape[0]
    return loss
