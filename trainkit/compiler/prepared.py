"""Ops whose function does part of their work outside ``apply``: on arrays before it, or on the node after it.

``max_pool2d`` scans the windows first and hands the result to its op as a keyword argument. A replay must redo
that scan on the new input rather than reuse the captured one, so such an op is listed here with the keyword
arguments to recompute and the function that recomputes them from the op's input arrays and other arguments.

>>> sorted(cls.__name__ for cls in PREPARED)
['MaxPool2DWithIndicesBackward0']
"""

from __future__ import annotations

import math

from ..functional.attention import ScaledDotProductAttention
from ..functional.normalization import BatchNorm
from ..functional.pooling import MaxPool2DWithIndices, max_pool_scan
from ..functional.rnn_steps import FusedLayer


def _max_pool(arrays: list, params: dict) -> dict:
    x = arrays[0]
    h, w = x.shape[-2:]
    return {"found": max_pool_scan(x.reshape(math.prod(x.shape[:-2]), h, w), params["geom"])}


# op class -> (the keyword arguments recomputed at each replay, the function that recomputes them)
PREPARED = {MaxPool2DWithIndices: (("found",), _max_pool)}


# Ops whose function bumps the version of tensors whose arrays the op updated in place (batch norm's running
# statistics, in training): op class -> the keyword arguments holding those arrays.
BUMPED = {BatchNorm: ("running_mean", "running_var")}


# Ops whose function adds saved arrays to the node after ``apply``: a replay adds them to its own node, from what
# ``forward`` left on it; each function returns the arrays to add.
def _attention(node) -> tuple:
    return (node.extra[0].swapaxes(-1, -2),)


def _fused_layer(node) -> tuple:
    keep = node.keep
    node.keep = None
    node.keep_names = tuple(keep)
    return tuple(keep.values())


AFTER_APPLY = {ScaledDotProductAttention: _attention, FusedLayer: _fused_layer}


def after_apply(cls):
    """The change ``cls``'s function makes to its node after ``apply``, or None.

    >>> after_apply(ScaledDotProductAttention).__name__, after_apply(BatchNorm)
    ('_attention', None)
    """
    for base in cls.__mro__:
        if base in AFTER_APPLY:
            return AFTER_APPLY[base]
    return None
