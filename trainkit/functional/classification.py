"""Classification losses with ``torch.nn.functional``'s signatures: nll_loss and cross_entropy.

Class-index targets run as one fused node (``NllLossBackward0``, as PyTorch names its last step): cross-entropy keeps
only two numbers per row (the row's max and the log of its shifted sum of exponentials) and recomputes the softmax in
backward from the saved input. Class-probability targets and label smoothing are rarer; they are composed of
log_softmax, products and sums exactly as PyTorch composes them, so their graphs (and grad_fn names) are PyTorch's.

Rows whose largest logit is +-inf or nan are nan throughout, as PyTorch's log_softmax makes them: shifting by an
infinite max leaves nothing finite to compare the others with.
"""

from __future__ import annotations

import numpy as np

from ..autograd.autocast import autocast_inputs, enabled_threads
from ..autograd.backend import float32_for_bfloat16, kind_of, xp_of
from ..autograd.function import Op
from ..autograd.ops import activation, dual
from ..autograd.ops.shape import index_into_zeros
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor
from .reduction import check_reduction, reduce_loss, refuse_grad, unreduce_grad

__all__ = ["cross_entropy", "nll_loss"]


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


def _row_scale(g, reduction: str, count):
    """The gradient of each row's loss, as a column (or a scalar for 'mean' and 'sum')."""
    s = unreduce_grad(g, reduction, count)
    return s.reshape(-1, 1) if reduction == "none" else s


def _picked(target, weight, ignore_index: int, classes: int, dtype):
    """Each row's target class (0 where ignored), the weight w[t_i] of its term (0 where ignored), and which rows
    count."""
    xp = xp_of(target)
    t = target.reshape(-1)
    valid = t != ignore_index
    t = xp.where(valid, t, 0)
    w = xp.ones(classes, dtype=dtype) if weight is None else weight
    return t, xp.where(valid, w[t], 0).astype(dtype, copy=False), valid


class NllLoss(Op, name="NllLossBackward0"):
    """loss_i = -w[t_i] x[i, t_i] (0 where t_i = ignore_index); 'mean' divides the sum by sum_i w[t_i].
    dx[i, t_i] = -w[t_i] * g_i (g_i: row i's share of the output gradient), 0 elsewhere."""

    @float32_for_bfloat16
    def forward(self, x, target, weight, ignore_index, reduction):
        xp = xp_of(x)
        rows = _to_rows(x)
        t, wt, valid = _picked(target, weight, ignore_index, rows.shape[1], x.dtype)
        self.in_shape, self.reduction, self.count = x.shape, reduction, wt.sum()
        self.extra = (t, wt)
        # where, not a product with the zero weight: an ignored row's nan or inf must not leak into the loss
        with np.errstate(invalid="ignore"):
            loss = xp.where(valid, -wt * rows[xp.arange(rows.shape[0]), t], 0).astype(x.dtype, copy=False)
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


class CrossEntropy(Op, name="NllLossBackward0"):
    """Cross-entropy with class-index targets, log-softmax fused in. With m_i the row's max and
    s_i = log(sum_c e^(x_ic - m_i)), log_softmax(x)_ic = (x_ic - m_i) - s_i, subtracted in that order as PyTorch
    does (a huge m_i would swallow s_i were the two added first):
        loss_i = -w[t_i] log_softmax(x)_{i,t_i}   (0 where ignored),   'mean' divides the sum by sum_i w[t_i].
    dx_i = g_i w[t_i] (softmax(x_i) - onehot(t_i))."""

    save_inputs = (0,)

    @float32_for_bfloat16
    def forward(self, x, target, weight, ignore_index, reduction):
        xp = xp_of(x)
        rows = _to_rows(x)
        m, c = rows.shape
        t, wt, valid = _picked(target, weight, ignore_index, c, x.dtype)
        if c:
            top = rows.max(axis=1, keepdims=True)
        else:  # no classes: every row is empty, so nothing to shift by
            top = xp.zeros((m, 1), dtype=x.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            shifted = rows - top
            logsum = xp.log(xp.exp(shifted, out=shifted).sum(axis=1))
            picked = rows[xp.arange(m), t] - top[:, 0] if c else logsum
            loss = xp.where(valid, wt * (logsum - picked), 0).astype(x.dtype, copy=False)
        self.in_shape, self.reduction, self.count = x.shape, reduction, wt.sum()
        self.extra = (t, wt, top, logsum.reshape(-1, 1))
        return reduce_loss(loss.reshape(target.shape), reduction, self.count)

    def backward(self, g):
        (x,) = self.saved_tensors
        t, wt, top, logsum = self.extra
        rows = _to_rows(x)
        m, c = rows.shape
        xp = xp_of(t)
        s = _row_scale(g, self.reduction, self.count)
        if isinstance(rows, Tensor):
            q = xp.zeros((m, c), dtype=wt.dtype)
            q[xp.arange(m), t] = wt
            dx = (activation.softmax(rows, 1) * wt.reshape(-1, 1) - q) * s
            return _from_rows(dx, self.in_shape)
        with np.errstate(invalid="ignore", over="ignore"):
            p = rows - top
            xp.exp(p, out=p)
            # softmax (scaled by 1 / sum = e^-logsum) times the row's weight and gradient in one pass, then the
            # target's share off its column only
            p *= wt.reshape(-1, 1) * s * xp.exp(-logsum)
            p[xp.arange(m), t] -= wt * (s.reshape(-1) if self.reduction == "none" else s)
        return _from_rows(p, self.in_shape)


class CrossEntropy2d(CrossEntropy, name="NllLoss2DBackward0"):
    pass


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
    if weight is not None and weight._data.dtype != input._data.dtype:
        raise RuntimeError(
            f"expected scalar type {scalar_name(input)} but found {scalar_name(weight)}: give the class weights "
            f"the input's dtype (weight.to({input.dtype}))"
        )
    t = target._data
    bad = ((t < 0) | (t >= classes)) & (t != ignore_index)
    if bad.any():
        raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")


def _class_weight(weight: Tensor | None, fn: str):
    if weight is None:
        return None
    refuse_grad(weight, "weight", fn)
    return weight._data.reshape(-1)


def _by_rank(cls_1d, cls_2d, input: Tensor, target: Tensor, reduction: str, **params) -> Tensor:
    """Run a class-index loss op as PyTorch's nll_loss_nd does: up to 2-D directly, 4-D as 2-D (spatial), and
    other ranks through a (N, C, 1, -1) view whose output is viewed back."""
    if input.ndim <= 2:
        return cls_1d.apply(input, target=target._data, reduction=reduction, **params)
    if input.ndim == 4:
        return cls_2d.apply(input, target=target._data, reduction=reduction, **params)
    n, c = input.shape[0], input.shape[1]
    out = cls_2d.apply(input.reshape(n, c, 1, -1), target=target._data.reshape(n, 1, -1), reduction=reduction, **params)
    return out.reshape(tuple(target.shape)) if reduction == "none" else out


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class-index targets from log-probabilities ``input`` of shape (N, C), (C,) or
    (N, C, d1, ...): -w[t] * input[t], averaged over the total weight of the counted targets.

    >>> import trainkit
    >>> logp = trainkit.tensor([[-0.5, -1.0], [-2.0, -0.1]])
    >>> nll_loss(logp, trainkit.tensor([0, 1]))
    tensor(0.3000)
    """
    if enabled_threads:  # only while some thread has autocast on
        input, target, weight = autocast_inputs("nll_loss", input, target, weight)
    reduction = check_reduction(reduction, size_average, reduce)
    _check_class_target(input, target, weight, ignore_index)
    weight = _class_weight(weight, "nll_loss_forward")
    return _by_rank(NllLoss, NllLoss2d, input, target, reduction, weight=weight, ignore_index=ignore_index)


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between the softmax of logits ``input`` (N, C), (C,) or (N, C, d1, ...) and ``target``.

    ``target`` holds class indices (shape (N,) or (N, d1, ...), integers) or class probabilities (the shape of
    ``input``, floats). With class indices one fused op computes log-softmax and the loss, stably (no exp overflows)
    and without keeping a log-probability array alive. ``label_smoothing`` e mixes the target with the uniform
    distribution: (1 - e) * target + e / C.

    >>> import trainkit
    >>> logits = trainkit.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    >>> cross_entropy(logits, trainkit.tensor([0, 2]))
    tensor(0.6691)
    """
    if enabled_threads:  # only while some thread has autocast on
        input, target, weight = autocast_inputs("cross_entropy", input, target, weight)
    reduction = check_reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if kind_of(input._data.dtype) != "f":
        kind = "lastdim_kernel_impl" if input.ndim <= 2 else "kernel_impl"
        raise NotImplementedError(f"\"log_softmax_{kind}\" not implemented for '{scalar_name(input)}'")
    if input.ndim >= 1 and tuple(input.shape) == tuple(target.shape):
        return _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing)
    _check_class_target(input, target, weight, ignore_index)
    if label_smoothing:
        return _cross_entropy_smoothed(input, target, weight, ignore_index, reduction, label_smoothing)
    weight = _class_weight(weight, "nll_loss_forward")
    return _by_rank(CrossEntropy, CrossEntropy2d, input, target, reduction, weight=weight, ignore_index=ignore_index)


class DivScalar(Op, name="DivBackward1"):
    """out = x / n for a Python number n (PyTorch's node for dividing by a scalar).   dx = g / n."""

    def forward(self, x, n):
        self.n = n
        return x / n

    def backward(self, g):
        return g / self.n


def _class_view(weight: Tensor, ndim: int) -> Tensor:
    """The class weights shaped to broadcast along the class dim of an ``ndim``-d input."""
    return weight if ndim <= 1 else weight.reshape((1, -1) + (1,) * (ndim - 2))


def _cross_entropy_smoothed(input, target, weight, ignore_index, reduction, smoothing) -> Tensor:
    """Class indices with label smoothing, composed as PyTorch composes it:
    (1 - e) nll_loss(log_softmax(x)) + (e / C) * smooth, smooth_i = -sum_c w_c log_softmax(x)_ic (0 where ignored),
    'mean' dividing smooth's sum by the weight of the counted targets."""
    class_dim = 0 if input.ndim == 1 else 1
    classes = input.shape[class_dim]
    logp = activation.log_softmax(input, class_dim)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    smooth = -(logp if weight is None else logp * _class_view(weight, input.ndim)).sum(class_dim)
    ignored = target == ignore_index
    smooth = smooth.masked_fill(ignored, 0.0)
    if reduction == "mean":
        kept = target._data[~ignored._data]
        if weight is None:
            with np.errstate(invalid="ignore", divide="ignore"):  # every target ignored: nan, as in PyTorch
                smooth = smooth.sum() / kept.size
        else:
            smooth = smooth.sum() / weight.reshape(-1)[Tensor._make(kept)].sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - smoothing) * nll + smooth * (smoothing / classes)


def _cross_entropy_probs(input, target, weight, ignore_index, reduction, smoothing) -> Tensor:
    """Class probabilities, composed as PyTorch composes them: -(log_softmax(x) * target * w) summed over the
    classes, then summed, or averaged over the rows (the number of elements over C)."""
    if not target.is_floating_point():
        raise RuntimeError(f"Expected floating point type for target with class probabilities, got {target.dtype}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    class_dim = 0 if input.ndim == 1 else 1
    classes = input.shape[class_dim]
    if weight is not None and (weight.ndim != 1 or weight.numel() != classes):
        raise RuntimeError(
            f"cross_entropy: weight tensor should be defined either for all {classes} classes or no classes but got "
            f"weight tensor of shape: {list(weight.shape)}"
        )
    logp = activation.log_softmax(input, class_dim)
    if smoothing > 0:
        target = target * (1 - smoothing) + smoothing / classes
    terms = logp * target
    if weight is not None:
        terms = terms * _class_view(weight, input.ndim)
    if reduction == "none":
        return -terms.sum(class_dim)
    if reduction == "sum":
        return -terms.sum()
    if input.numel() == 0:  # a mean over no rows
        return -terms.sum().fill_(float("nan"))
    return DivScalar.apply(-terms.sum(), n=input.numel() // classes)
