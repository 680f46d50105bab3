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


def _sort_index(data, d: int, descending: bool, stable: bool):
    xp = xp_of(data)
    kw = {"kind": "stable"} if xp is np else {}
    if descending:
        key = ~data if data.dtype.kind == "b" else -data
        if data.dtype.kind == "u":
            key = data.max() - data
        return xp.argsort(key, axis=d, **kw)
    return xp.argsort(data, axis=d, **kw)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """(values, indices): ``input`` sorted along ``dim``; equal values keep their order."""
    data = input._data
    if data.ndim == 0:
        return sort_result(input.clone(), Tensor._make(xp_of(data).zeros((), dtype=np.int64)))
    d = input._dim(dim)
    order = _sort_index(data, d, descending, stable)
    values = Sort.apply(input, index=along(order, d), accumulate=False)
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
    n = data.shape[d] if data.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if data.ndim == 0:
        return topk_result(input.clone(), Tensor._make(xp_of(data).zeros((), dtype=np.int64)))
    order = _sort_index(data, d, largest, True)
    order = order[(slice(None),) * d + (slice(0, k),)]
    values = Topk.apply(input, index=along(order, d), accumulate=False)
    return topk_result(values, Tensor._make(order.astype(np.int64)))
