"""Dropout: ``dropout`` zeroes single elements, ``dropout1d``/``2d``/``3d`` whole channels (``input[n, c]``); the
rest is scaled by 1 / (1 - p). Each is a multiplication by a random mask, so its node is ``MulBackward0``, as in
PyTorch. The mask is drawn as PyTorch draws it on the CPU, ``empty(shape).bernoulli_(1 - p).div_(1 - p)`` (a float64
uniform per element, kept where it falls below 1 - p), so a seed drops the units PyTorch drops.
"""

from __future__ import annotations

import warnings

from ..autograd.backend import kind_of, xp_of
from ..autograd.ops import math as tmath
from ..autograd.ops.random_fill import bernoulli_keep
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d"]


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p), so the expectation is unchanged.

    The mask comes from the seeded default generator of ``input``'s device. Outside training (or with p = 0) the
    input is returned as it is; p = 1 gives zeros.

    >>> import trainkit
    >>> y = dropout(trainkit.ones(1000), p=0.5)
    >>> sorted(set(y.tolist()))
    [0.0, 2.0]
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    data = input._data
    if p == 1.0:
        mask = xp_of(data).zeros(data.shape, dtype=data.dtype)
    else:
        mask = bernoulli_keep(data.shape, 1 - p, data)
    mask = Tensor._make(xp_of(data).asarray(mask))  # an array also for a 0-d input
    return input.mul_(mask) if inplace else tmath.mul(input, mask)


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
        if kind_of(data.dtype) != "f":
            raise RuntimeError(f"result type Float can't be cast to the desired output type {scalar_name(data.dtype)}")
        mask = bernoulli_keep(shape, 1 - p, data)
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
