"""Sorting: sort, argsort and topk. The values are picked by the sorting index; their gradient goes back there."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..backend import kind_of, xp_of
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
        if kind_of(data.dtype) == "f":
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
    d = input._dim(dim)
    if data.ndim == 0:
        return Tensor._make(xp_of(data).zeros((), dtype=np.int64))
    return Tensor._make(_sort_index(data, d, descending, stable).astype(np.int64))


# --- PyTorch's CPU topk, step by step -------------------------------------------------------------------------
# Which of several equal values topk returns, and their order with sorted=False, is whatever the C++ standard
# library's nth_element, sort and partial_sort (libstdc++'s, which PyTorch's CPU kernel calls) leave there. The
# functions below replay those algorithms on a list, so that ties come out as in PyTorch; rows without ties take
# the vectorized path, which gives the same answer.


def _insertion_sort(q: list, lo: int, hi: int, less) -> None:
    for i in range(lo + 1, hi):
        v = q[i]
        if less(v, q[lo]):
            q[lo + 1 : i + 1] = q[lo:i]
            q[lo] = v
        else:
            _linear_insert(q, i, less)


def _linear_insert(q: list, i: int, less) -> None:
    v = q[i]
    while less(v, q[i - 1]):
        q[i] = q[i - 1]
        i -= 1
    q[i] = v


def _partition_pivot(q: list, lo: int, hi: int, less) -> int:
    """Median of three moved to ``lo``, then Hoare's partition of the rest around it: the cut."""
    a, b, c = lo + 1, lo + (hi - lo) // 2, hi - 1
    if less(q[a], q[b]):
        m = b if less(q[b], q[c]) else (c if less(q[a], q[c]) else a)
    else:
        m = a if less(q[a], q[c]) else (c if less(q[b], q[c]) else b)
    q[lo], q[m] = q[m], q[lo]
    pivot, first, last = q[lo], lo + 1, hi
    while True:
        while less(q[first], pivot):
            first += 1
        last -= 1
        while less(pivot, q[last]):
            last -= 1
        if first >= last:
            return first
        q[first], q[last] = q[last], q[first]
        first += 1


def _adjust_heap(q: list, lo: int, hole: int, n: int, v, less) -> None:
    top, child = hole, hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if less(q[lo + child], q[lo + child - 1]):
            child -= 1
        q[lo + hole] = q[lo + child]
        hole = child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        q[lo + hole] = q[lo + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and less(q[lo + parent], v):
        q[lo + hole] = q[lo + parent]
        hole, parent = parent, (parent - 1) // 2
    q[lo + hole] = v


def _heap_select(q: list, lo: int, mid: int, hi: int, less) -> None:
    n = mid - lo
    if n >= 2:
        for parent in range((n - 2) // 2, -1, -1):
            _adjust_heap(q, lo, parent, n, q[lo + parent], less)
    for i in range(mid, hi):
        if less(q[i], q[lo]):
            v, q[i] = q[i], q[lo]
            _adjust_heap(q, lo, 0, n, v, less)


def _sort_heap(q: list, lo: int, hi: int, less) -> None:
    while hi - lo > 1:
        hi -= 1
        v, q[hi] = q[hi], q[lo]
        _adjust_heap(q, lo, 0, hi - lo, v, less)


def _introsort(q: list, lo: int, hi: int, depth: int, less) -> None:
    while hi - lo > 16:
        if depth == 0:
            _heap_select(q, lo, hi, hi, less)
            _sort_heap(q, lo, hi, less)
            return
        depth -= 1
        cut = _partition_pivot(q, lo, hi, less)
        _introsort(q, cut, hi, depth, less)
        hi = cut


def _std_sort(q: list, lo: int, hi: int, less) -> None:
    if hi - lo < 2:
        return
    _introsort(q, lo, hi, 2 * ((hi - lo).bit_length() - 1), less)
    if hi - lo > 16:
        _insertion_sort(q, lo, lo + 16, less)
        for i in range(lo + 16, hi):
            _linear_insert(q, i, less)
    else:
        _insertion_sort(q, lo, hi, less)


def _nth_element(q: list, nth: int, less) -> None:
    lo, hi = 0, len(q)
    depth = 2 * (hi.bit_length() - 1)
    while hi - lo > 3:
        if depth == 0:
            _heap_select(q, lo, nth + 1, hi, less)
            q[lo], q[nth] = q[nth], q[lo]
            return
        depth -= 1
        cut = _partition_pivot(q, lo, hi, less)
        if cut <= nth:
            lo = cut
        else:
            hi = cut
    _insertion_sort(q, lo, hi, less)


def _topk_row(row: list, k: int, largest: bool, sorted: bool) -> list:
    """The indices PyTorch's CPU kernel picks from one row: nan counts as the largest value."""

    def bigger(x, y):
        return (x[0] != x[0] and y[0] == y[0]) or x[0] > y[0]

    def smaller(x, y):
        return (x[0] == x[0] and y[0] != y[0]) or x[0] < y[0]

    less = bigger if largest else smaller
    q = [(v, i) for i, v in enumerate(row)]
    if k * 64 <= len(q):
        _heap_select(q, 0, k, len(q), less)
        _sort_heap(q, 0, k, less)
    else:
        _nth_element(q, k - 1, less)
        if sorted:
            _std_sort(q, 0, k - 1, less)
    return [i for _, i in q[:k]]


def _replay_ties(data, order, k: int, largest: bool, sorted: bool):
    """``order`` (the stable sorting order along the last dimension) cut to ``k``, with the rows whose pick depends
    on the kernel's steps replayed: a tie among the first k + 1 sorted values, or any row with sorted=False where
    PyTorch leaves nth_element's order."""
    xp = xp_of(data)
    n = data.shape[-1]
    if not sorted and k * 64 > n:
        rows = xp.ones(data.shape[:-1], dtype=bool)
    else:
        head = xp.take_along_axis(data, order[..., : k + 1], axis=-1)
        same = head[..., 1:] == head[..., :-1]
        if kind_of(data.dtype) == "f":
            same |= xp.isnan(head[..., 1:]) & xp.isnan(head[..., :-1])
        rows = same.any(axis=-1)
    shape = order.shape[:-1] + (k,)
    order = order[..., :k].reshape(-1, k).copy()
    rows = rows.reshape(-1)
    if rows.any():
        host = np.asarray(data.get() if hasattr(data, "get") else data).reshape(-1, n)
        for r in np.flatnonzero(np.asarray(rows.get() if hasattr(rows, "get") else rows)):
            order[r] = xp.asarray(_topk_row(host[r].tolist(), k, largest, sorted))
    return order.reshape(shape)


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """(values, indices) of the ``k`` largest (or smallest) elements along ``dim``; nan counts as the largest.
    Among equal values, and in the order of ``sorted=False``, the indices are those PyTorch's CPU kernel gives.

    >>> import trainkit
    >>> trainkit.topk(trainkit.tensor([1, 3, 3, 2]), 2).indices
    tensor([1, 2])
    """
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
    if k:
        last = xp_of(data).moveaxis
        order = last(_replay_ties(last(data, d, -1), last(order, d, -1), k, largest, sorted), -1, d)
    else:
        order = order[(slice(None),) * d + (slice(0, 0),)]
    values = Topk.apply(input, index=along(order, d), accumulate=False)
    return topk_result(values, Tensor._make(order.astype(np.int64)))
