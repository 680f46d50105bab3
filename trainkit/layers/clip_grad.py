"""Gradient clipping, in place on ``.grad``, as ``torch.nn.utils``: by total norm or by value."""

from __future__ import annotations

import math
import types
import warnings
from collections.abc import Iterable

import numpy as np

from ..autograd.backend import to_device, xp_of
from ..autograd.function import replayed_whole
from ..autograd.grad_mode import no_grad
from ..autograd.tensor import Tensor

TensorOrTensors = Tensor | Iterable[Tensor]


def _vector_norm(xp, x, norm_type: float):
    """The ``norm_type``-norm of all of ``x``'s values, as a 0-d array of ``x``'s dtype."""
    return xp.asarray(_reduce(xp, x, norm_type), dtype=x.dtype)


def _reduce(xp, x, norm_type: float):
    if x.size == 0:
        return xp.zeros((), dtype=x.dtype)
    if norm_type == math.inf:
        return xp.max(xp.abs(x))
    if norm_type == -math.inf:
        return xp.min(xp.abs(x))
    if norm_type == 0:
        return xp.count_nonzero(x)
    if norm_type == 1:
        return xp.sum(xp.abs(x))
    if norm_type == 2:
        flat = x.reshape(-1)
        return xp.sqrt(xp.dot(flat, flat))
    return xp.power(xp.sum(xp.power(xp.abs(x), x.dtype.type(norm_type))), x.dtype.type(1.0 / norm_type))


@replayed_whole
def get_total_norm(tensors: TensorOrTensors, norm_type: float = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    r"""The norm of all of ``tensors``' values taken as one vector: the norm of the vector of their norms,
    :math:`\|(\|t_1\|_p, \ldots, \|t_n\|_p)\|_p`, on the first tensor's device.

    >>> import trainkit
    >>> get_total_norm([trainkit.tensor([3.0]), trainkit.tensor([4.0])])
    tensor(5.)
    """
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._make(np.zeros((), dtype=np.float32))
    first = tensors[0]
    xp = xp_of(first._data)
    norms = [to_device(_vector_norm(xp_of(t._data), t._data, norm_type), first.device) for t in tensors]
    total = _vector_norm(xp, xp.stack(norms), norm_type)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`"
        )
    return Tensor._make(total)


@replayed_whole
def clip_grads_with_norm_(parameters: TensorOrTensors, max_norm: float, total_norm: Tensor) -> None:
    r"""Scale every gradient by :math:`\min(1, \text{max\_norm} / (\text{total\_norm} + 10^{-6}))`, in place.

    The factor stays a tensor (no host round trip on a GPU); multiplying by 1 when there is nothing to clip is
    cheaper than a device-to-host sync to find that out.
    """
    parameters = [parameters] if isinstance(parameters, Tensor) else parameters
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    total = total_norm._data
    xp = xp_of(total)
    one = total.dtype.type(1.0)
    coef = xp.asarray(xp.minimum(total.dtype.type(float(max_norm)) / (total + total.dtype.type(1e-6)), one))
    with no_grad():
        for g in grads:
            g.mul_(Tensor._make(to_device(coef, g.device).astype(g._data.dtype, copy=False)))


@replayed_whole
def clip_grad_norm_(
    parameters: TensorOrTensors,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    r"""Scale the gradients so that their total ``norm_type``-norm is at most ``max_norm``; return that norm
    (before clipping) as a tensor.

    .. math::
        n = \big\|(\|g_1\|_p, \ldots, \|g_k\|_p)\big\|_p, \qquad
        g_i \leftarrow g_i \cdot \min\!\left(1, \frac{\text{max\_norm}}{n + 10^{-6}}\right)

    ``norm_type`` may be ``float('inf')`` (the largest absolute value). Parameters without a gradient are
    skipped; ``foreach`` is accepted for compatibility and changes nothing.

    >>> import trainkit
    >>> w = trainkit.zeros(2, requires_grad=True)
    >>> w.grad = trainkit.tensor([3.0, 4.0])
    >>> clip_grad_norm_([w], max_norm=1.0)
    tensor(5.)
    >>> w.grad
    tensor([0.6000, 0.8000])
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)  # a generator would be spent by the first pass
        if is_generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total_norm)
    return total_norm


@replayed_whole
def clip_grad_value_(parameters: TensorOrTensors, clip_value: float, foreach: bool | None = None) -> None:
    r"""Clamp every gradient into :math:`[-c, c]` in place: :math:`g \leftarrow \min(\max(g, -c), c)`.

    >>> import trainkit
    >>> w = trainkit.zeros(3, requires_grad=True)
    >>> w.grad = trainkit.tensor([-2.0, 0.5, 3.0])
    >>> clip_grad_value_([w], clip_value=1.0)
    >>> w.grad
    tensor([-1.0000,  0.5000,  1.0000])
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    clip_value = float(clip_value)
    with no_grad():
        for p in parameters:
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)


__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]
