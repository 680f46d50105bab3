"""Constant padding, and one-hot encoding: ``F.pad`` and ``F.one_hot``."""

from __future__ import annotations

import numpy as np

from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor


class ConstantPad(Op, name="ConstantPadNdBackward0"):
    """out = x with ``value`` added around the last dimensions (negative amounts crop).   dx = the matching slice
    of g."""

    def forward(self, x, widths, value):
        self.in_shape = x.shape
        grow = [(max(b, 0), max(a, 0)) for b, a in widths]
        crop = tuple(slice(max(-b, 0), n - max(-a, 0)) for (b, a), n in zip(widths, x.shape))
        out = xp_of(x).pad(x[crop], grow, mode="constant", constant_values=value)
        self.inner = tuple(
            slice(max(b, 0), max(b, 0) + (s.stop - s.start)) for (b, _), s in zip(widths, crop)
        )
        self.crop = crop
        return out

    def backward(self, g):
        inner = g[self.inner]
        if all(s.start == 0 and s.stop == n for s, n in zip(self.crop, self.in_shape)):
            return inner
        from .dual import index_into_zeros

        return index_into_zeros(inner, self.in_shape, self.crop, False)


def pad(input: Tensor, pad: tuple, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last ``len(pad) // 2`` dimensions: ``pad = (left, right, top, bottom, ...)``, last dimension first.

    >>> import trainkit
    >>> pad(trainkit.ones(1, 2), (1, 1)).tolist()
    [[0.0, 1.0, 1.0, 0.0]]
    """
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.ndim}")
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} is not supported (only 'constant')")
    pairs = [(int(pad[i]), int(pad[i + 1])) for i in range(0, len(pad), 2)]
    widths = [(0, 0)] * (input.ndim - len(pairs)) + pairs[::-1]
    return ConstantPad.apply(input, widths=tuple(widths), value=0 if value is None else value)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows for integer class indices (``num_classes`` defaults to the largest index + 1).

    >>> import trainkit
    >>> one_hot(trainkit.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    data = tensor._data
    if data.dtype.kind not in "iu":
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    xp = xp_of(data)
    if data.size and int(data.min()) < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(data.max()) + 1 if data.size else 0
    elif data.size and int(data.max()) >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = (data[..., None] == xp.arange(num_classes)).astype(np.int64)
    return Tensor._make(out)


__all__ = ["one_hot", "pad"]
