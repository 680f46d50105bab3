"""A loss's ``reduction``: 'mean' (the default), 'sum' or 'none', and the legacy ``size_average``/``reduce`` flags."""

from __future__ import annotations

import warnings

import numpy as np

from ..autograd import grad_mode

_REDUCTIONS = ("none", "mean", "sum")


def check_reduction(reduction: str, size_average=None, reduce=None) -> str:
    """The reduction to use, from the legacy ``size_average``/``reduce`` flags when either is given."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
        warnings.warn(
            f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
            stacklevel=3,
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def reduce_loss(loss, reduction: str, count=None):
    """``loss`` (an array) summed, averaged over ``count`` (default: its size), or as it is."""
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    count = loss.size if count is None else count
    if count == 0:
        with np.errstate(invalid="ignore", divide="ignore"):  # nothing to average over gives nan, as in PyTorch
            return total / count
    return total / count


def unreduce_grad(g, reduction: str, count):
    """The gradient each term of the unreduced loss gets from ``g``, the gradient of the reduced one.

    A mean over nothing (every target ignored) is nan, but its terms get a zero gradient, as in PyTorch."""
    if reduction != "mean":
        return g
    return g / count if count else g * 0


def refuse_grad(t, name: str, fn: str) -> None:
    """PyTorch's error for an argument a loss does not differentiate (a class or element weight) that requires grad.

    >>> import trainkit
    >>> refuse_grad(trainkit.ones(3), "weight", "nll_loss_forward")  # no grad asked for: nothing to say
    """
    if t.requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError(
            f"The function '{fn}' is not differentiable with respect to argument '{name}'. This input cannot have "
            "requires_grad True."
        )
