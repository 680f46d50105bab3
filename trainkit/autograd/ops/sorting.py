"""Sorting: sort, argsort and topk. The values are picked by the sorting index; their gradient goes back there."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..backend import xp_of
from ..tensor import Tensor
from .gather_scatter import along
from .shape import Index

__all__ = ["argsort", "sort", "topk"]


topk_result = namedtuple("topk", ["values", "indices"])
sort_result = namedtuple("sort", ["values", "indices"])


class Topk(Index, name="TopkBackward0"):
    """values = x at the k largest (or smallest) positions along ``dim``.   dx = g placed back there."""


class Sort(Index, name="SortBackward0"):
    """values = x reordered along ``dim``.   dx = g put back in the original order."""


class SortStable(Index, name="SortBackward1"):
    """``sort`` called with ``stable=``: PyTorch's other overload, the same op."""


def _sort_index(data, d: int, descending: bool, stable: bool):
    """The stable sorting order along ``d``; nan is the largest value, as in PyTorch (first when descending)."""
    xp = xp_of(data)
    kw = {"kind": "stable"} if xp is np else {}
    if descending:
        key = ~data if data.dtype.kind == "b" else -data
        if data.dtype.kind == "u":
            key = data.max() - data
        order = xp.argsort(key, axis=d, **kw)
        if data.dtype.kind == "f":
            nan = xp.isnan(xp.take_along_axis(data, order, axis=d))
            if nan.any():  # -nan sorts last: move the nans to the front, keeping the order of the rest
                order = xp.take_along_axis(order, xp.argsort(~nan, axis=d, **kw), axis=d)
        return order
    return xp.argsort(data, axis=d, **kw)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable=None):
    """(values, indices): ``input`` sorted along ``dim``; equal values keep their order."""
    data = input._data
    cls = Sort if stable is None else SortStable
    d = input._dim(dim)
    if data.ndim == 0:
        return sort_result(cls.apply(input, index=(), accumulate=False), Tensor._make(xp_of(data).zeros((), np.int64)))
    order = _sort_index(data, d, descending, bool(stable))
    values = cls.apply(input, index=along(order, d), accumulate=False)
    return sort_result(values, Tensor._make(order.astype(np.int64)))


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The indices that sort ``input`` along ``dim``."""
    data = input._data
    if data.ndim == 0:
        return Tensor._make(xp_of(data).zeros((), dtype=np.int64))
    d = input._dim(dim)
    return Tensor._make(_sort_index(data, d, descending, stable).astype(np.int64))


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """(values, indices) of the ``k`` largest (or smallest) elements along ``dim``."""
    data = input._data
    d = input._dim(dim)
    if data.dtype.kind == "b":
        raise RuntimeError("topk does not support bool dtypes on CPU")
    n = data.shape[d] if data.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if data.ndim == 0:
        values = Topk.apply(input, index=(), accumulate=False)
        return topk_result(values, Tensor._make(xp_of(data).zeros((), dtype=np.int64)))
    order = _sort_index(data, d, largest, True)
    order = order[(slice(None),) * d + (slice(0, k),)]
    values = Topk.apply(input, index=along(order, d), accumulate=False)
    return topk_result(values, Tensor._make(order.astype(np.int64)))
