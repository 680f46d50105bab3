"""Masks: masked_fill, masked_select and nonzero."""

from __future__ import annotations

import numpy as np

from ..backend import kind_of, xp_of
from ..function import Op, shape_error
from ..scalar_fit import check_fits
from ..tensor import Tensor
from . import dual
from .shape import Index
from .type_names import scalar_name

__all__ = ["argwhere", "masked_fill", "masked_select", "nonzero"]


def _total(v):
    """The sum of all of ``v`` as a 0-d array or Tensor."""
    s = v.sum()
    return s if isinstance(v, Tensor) else xp_of(v).asarray(s)


class MaskedSelect(Index, name="MaskedSelectBackward0"):
    """out = the elements of x where mask holds, as a vector.   dx = g placed back at the mask."""


class MaskedFill(Op, name="MaskedFillBackward0"):
    """out = value where mask holds, else x.   dx = g where mask does not hold."""

    def forward(self, x, mask, value):
        self.mask = mask
        xp = xp_of(x)
        return xp.where(mask, xp.asarray(value).astype(x.dtype), x)

    def backward(self, g):
        return dual.keep(g, ~self.mask), None, None


class MaskedFillTensor(MaskedFill, name="MaskedFillBackward1"):
    """out = value (a 0-d tensor) where mask holds, else x.   dx = g off the mask,  dvalue = sum of g on it."""

    def backward(self, g):
        gv = _total(dual.keep(g, self.mask)) if self.next_functions[2][0] is not None else None
        return dual.keep(g, ~self.mask), None, gv


def _mask_array(mask, fn: str, like):
    if not isinstance(mask, Tensor):
        raise TypeError(f"{fn}(): argument 'mask' must be Tensor, not {type(mask).__name__}")
    if mask._data.dtype != np.bool_:
        raise RuntimeError(f"{fn} only supports boolean masks, but got mask with dtype {mask.dtype}")
    if type(mask._data) is not type(like):
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices!")
    return mask._data


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """``input`` with ``value`` (a number or a 0-d tensor) where the boolean ``mask`` (broadcast) holds.

    >>> import trainkit
    >>> trainkit.tensor([1, 2, 3]).masked_fill(trainkit.tensor([True, False, True]), 0)
    tensor([0, 2, 0])
    """
    _mask_array(mask, "masked_fill_", input._data)
    dtype = input._data.dtype
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value._data.ndim} dimension(s)."
            )
        if value.requires_grad and kind_of(dtype) not in "fc":
            raise RuntimeError(
                f"Autograd not support dtype: {scalar_name(dtype)}: the result of masked_fill has "
                f"the input's dtype, which has no gradient; pass value.detach() or a floating input"
            )
        check_fits(value._data.item(), dtype)
        return MaskedFillTensor.apply(input, mask, value)
    check_fits(value, dtype)
    return MaskedFill.apply(input, mask, value)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where the boolean ``mask`` holds (the two broadcast), as a vector."""
    m = _mask_array(mask, "masked_select", input._data)
    try:
        shape = np.broadcast_shapes(input._data.shape, m.shape)
    except ValueError as err:
        raise shape_error("masked_select", (m, input._data), err) from None
    if input._data.shape != shape:
        input = input.expand(*shape)
    if m.shape != shape:
        m = xp_of(m).broadcast_to(m, shape)
    return MaskedSelect.apply(input, index=m, accumulate=False)


def nonzero(input: Tensor, *, as_tuple: bool = False):
    """Indices of the non-zero elements: an (n, ndim) int64 tensor, or with ``as_tuple`` one vector per dimension."""
    data = input._data
    xp = xp_of(data)
    if as_tuple:
        parts = xp.nonzero(data.reshape(1) if data.ndim == 0 else data)
        return tuple(Tensor._make(p.astype(np.int64)) for p in parts)
    parts = xp.nonzero(data) if data.ndim else xp.nonzero(data.reshape(1))[:0]
    if not parts:
        return Tensor._make(xp.zeros((int(bool(data)), 0), dtype=np.int64))
    return Tensor._make(xp.stack(parts, axis=1).astype(np.int64))


def argwhere(input: Tensor) -> Tensor:
    """The indices of the non-zero elements, one row (of ``input.ndim`` int64 numbers) per element: ``nonzero``.

    >>> import trainkit
    >>> argwhere(trainkit.tensor([0, 3, 0, 5]))
    tensor([[1],
            [3]])
    """
    return nonzero(input)
