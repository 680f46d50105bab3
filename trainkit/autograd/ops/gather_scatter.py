"""Gather and scatter along a dimension: gather, take_along_dim, index_select, scatter, scatter_add and
scatter_reduce (and their in-place forms).

The forward computes one advanced index (``along``); the backward of a gather adds the gradient back at it, that
of a scatter gathers the gradient from it.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..backend import kind_of, xp_of
from ..function import Op, shape_error
from ..scalar_fit import stored_value
from ..tensor import Tensor
from . import dual
from .inplace import apply_inplace
from .shape import Index, SetItem, getitem

__all__ = [
    "gather",
    "index_select",
    "scatter",
    "scatter_",
    "scatter_add",
    "scatter_add_",
    "scatter_reduce",
    "scatter_reduce_",
    "take_along_dim",
]


def _index_array(index, fn: str, like):
    """An int64 index tensor's array, on ``like``'s device."""
    if not isinstance(index, Tensor):
        raise TypeError(f"{fn}(): argument 'index' must be Tensor, not {type(index).__name__}")
    if index._data.dtype not in (np.int32, np.int64):
        raise RuntimeError(f"{fn}(): Expected dtype int32/int64 for index")
    if type(index._data) is not type(like):
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {index.device} and "
            "another device!"
        )
    return index._data


def _empty_index(idx, input: Tensor):
    """An empty index as one of ``input``'s number of dimensions (PyTorch scatters nothing, whatever its shape)."""
    if idx.size:
        return idx
    return xp_of(idx).zeros((0,) * max(input._data.ndim, 1), dtype=idx.dtype)


def along(index, dim: int) -> tuple:
    """The full advanced index that picks ``index[..., i, ...]`` along ``dim`` and the same position elsewhere."""
    xp = xp_of(index)
    nd = index.ndim
    parts = []
    for a in range(nd):
        if a == dim:
            parts.append(index)
        else:
            shape = [1] * nd
            shape[a] = index.shape[a]
            parts.append(xp.arange(index.shape[a]).reshape(shape))
    return tuple(parts)


def _check_along(fn: str, input: Tensor, index, dim: int, other=None) -> None:
    if index.size == 0:  # PyTorch checks no sizes for an empty index
        return
    nd = max(input._data.ndim, 1)
    if index.ndim != input._data.ndim and not (index.ndim <= 1 and input._data.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    shape = input._data.shape or (1,)
    ishape = index.shape or (1,)
    for a in range(nd):
        if a != dim and ishape[a] > shape[a]:
            raise RuntimeError(
                f"Size does not match at dimension {a} expected index {list(ishape)} to be no larger than self "
                f"{list(shape)} apart from dimension {dim}"
            )
        if other is not None and ishape[a] > (other or (1,))[a]:
            raise RuntimeError(
                f"Size does not match at dimension {a} expected index {list(ishape)} to be no larger than src "
                f"{list(other)}"
            )
    if index.size:
        n = shape[dim]
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {n}")


class Gather(Index, name="GatherBackward0"):
    """out[i][j] = x[index[i][j]][j] (dim 0).   dx = g added at those positions into zeros (repeats add up)."""


class IndexSelect(Index, name="IndexSelectBackward0"):
    """out = x[..., index, ...] along ``dim``.   dx = g added back at index (repeats add up)."""


class Scatter(SetItem, name="ScatterBackward0"):
    """out = x with out[index[i][j]][j] = src[i][j] (dim 0).   dx = g with zeros there,  dsrc = g gathered there.

    Where an index repeats, the last write wins, as in PyTorch's CPU kernel.
    """

    def forward(self, x, value, index):
        self.index = index
        self.value_shape = value.shape
        out = x.copy()
        if xp_of(x) is np or x.ndim == 0:  # NumPy assigns in order: the last write wins already
            out[index] = value
        else:  # CuPy leaves the winner of a repeated position unset: keep only the last write to each
            xp = xp_of(x)
            flat = xp.ravel_multi_index(tuple(xp.broadcast_to(i, value.shape).ravel() for i in index), x.shape)
            _, first_from_end = xp.unique(flat[::-1], return_index=True)
            last = flat.size - 1 - first_from_end
            out.reshape(-1)[flat[last]] = value.reshape(-1)[last]
        return out


class ScatterValue(SetItem, name="ScatterBackward1"):
    """out = x with ``value`` written at the indexed positions.   dx = g with zeros there."""


class ScatterAdd(Op, name="ScatterAddBackward0"):
    """out = x with src added at the indexed positions (repeats add up).   dx = g,  dsrc = g gathered there."""

    def forward(self, x, src, index):
        self.index = index
        out = x.copy()
        xp_of(x).add.at(out, index, src)
        return out

    def backward(self, g):
        return g, g[self.index]


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """Values of ``input`` along ``dim`` at ``index`` (of the same number of dimensions).

    >>> import trainkit
    >>> trainkit.gather(trainkit.tensor([[1, 2], [3, 4]]), 1, trainkit.tensor([[0, 0], [1, 0]]))
    tensor([[1, 1],
            [4, 3]])
    """
    d = input._dim(dim)
    idx = _index_array(index, "gather", input._data)
    _check_along("gather", input, idx, d)
    if idx.size == 0 and input._data.ndim:  # PyTorch checks nothing more: an empty result of the index's shape
        empty = xp_of(idx).zeros(idx.shape, dtype=np.int64)
        return Gather.apply(input, index=(empty,) * input._data.ndim, accumulate=True)
    if input._data.ndim == 0:
        return gather(input.reshape(1), 0, index.reshape(1)).reshape(idx.shape)
    return Gather.apply(input, index=along(idx, d), accumulate=True)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``input``'s values at ``indices`` along ``dim`` (the two broadcast), or of the flattened input."""
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    d = input._dim(dim)
    idx = _index_array(indices, "take_along_dim", input._data)
    if idx.ndim != input._data.ndim:
        raise RuntimeError(
            "torch.take_along_dim(): input and indices should have the same number of dimensions, "
            f"but got {input._data.ndim} dimensions for input, and {idx.ndim} dimensions for indices"
        )
    if not input._data.ndim:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions: pass dim=None for a 0-d input")
    # PyTorch wraps indices along a given dim modulo its size (so -1 is the last, and 5 of 4 is 1)
    n = input._data.shape[d]
    if idx.size:
        if not n:
            raise RuntimeError(f"ZeroDivisionError: take_along_dim cannot pick from dimension {d}, which has size 0")
        idx = idx % n
        indices = Tensor._make(idx)
    a = tuple(1 if a == d else n for a, n in enumerate(input._data.shape))
    b = tuple(1 if a == d else n for a, n in enumerate(idx.shape))
    try:
        shape = list(np.broadcast_shapes(a, b))
    except ValueError as err:
        raise shape_error("take_along_dim", (np.empty(a, bool), np.empty(b, bool)), err) from None
    in_shape = list(shape)
    in_shape[d] = input._data.shape[d]
    idx_shape = list(shape)
    idx_shape[d] = idx.shape[d]
    if tuple(in_shape) != input._data.shape:
        input = input.expand(*in_shape)
    if tuple(idx_shape) != idx.shape:
        indices = Tensor._make(xp_of(idx).broadcast_to(idx, tuple(idx_shape)))
    return gather(input, d, indices)


def _scatter_src(src: Tensor, index) -> Tensor:
    if src._data.shape == index.shape:
        return src
    return getitem(src, tuple(slice(0, n) for n in index.shape))


def _ufunc_at(name: str, out, index: tuple, src) -> None:
    """``xp.<name>.at(out, index, src)``: combine ``src`` into ``out`` at ``index``, repeated positions included.

    CuPy has ``at`` only for the ufuncs it can run atomically (add, maximum, minimum; not multiply), so the others
    are done on the host."""
    xp = xp_of(out)
    at = getattr(getattr(xp, name), "at", None)
    if xp is np or (at is not None and name != "multiply"):
        at(out, index, src)
        return
    host = out.get()
    getattr(np, name).at(host, tuple(i.get() for i in index), src.get() if hasattr(src, "get") else src)
    out[...] = xp.asarray(host)


class ScatterReduceLegacy(Op, name="NotImplemented"):
    """out = x with src (or a number) added to / multiplied into the indexed positions: ``scatter(reduce=...)``.

    PyTorch has no derivative for it: the graph records a node whose backward raises, and so does this one."""

    def forward(self, x, src, index, ufunc):
        out = x.copy()
        _ufunc_at(ufunc, out, index, src)
        return out

    def backward(self, g):
        raise RuntimeError("derivative for aten::scatter is not implemented")


SCATTER_REDUCE_WARNING = (
    "The reduce argument of torch.scatter with Tensor src is deprecated and will be removed in a future PyTorch "
    "release. Use torch.scatter_reduce instead for more reduction options."
)


def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce: str | None = None) -> Tensor:
    """A copy of ``input`` with ``src`` (a tensor, or one number) written along ``dim`` at ``index``; with
    ``reduce='add'`` or ``'multiply'`` it is added to or multiplied into what is there instead (no gradient, as in
    PyTorch: use ``scatter_reduce`` for that).

    >>> import trainkit
    >>> x = trainkit.zeros(2, 3)
    >>> trainkit.scatter(x, 1, trainkit.tensor([[2], [0]]), trainkit.ones(2, 1))
    tensor([[0., 0., 1.],
            [1., 0., 0.]])
    >>> trainkit.scatter(x, 1, trainkit.tensor([[0, 0]]), 2.0, reduce='add')
    tensor([[4., 0., 0.],
            [0., 0., 0.]])
    """
    cls, other, params = _scatter_op(input, dim, index, src, value, reduce)
    return cls.apply(input, other, **params)


def scatter_(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce: str | None = None) -> Tensor:
    """``scatter`` in place: ``input`` itself, changed (``x.scatter_(...)``).

    >>> import trainkit
    >>> trainkit.zeros(3).scatter_(0, trainkit.tensor([1]), 5.0)
    tensor([0., 5., 0.])
    """
    cls, other, params = _scatter_op(input, dim, index, src, value, reduce)
    return apply_inplace(input, cls, other, **params)


def _scatter_op(input: Tensor, dim: int, index: Tensor, src, value, reduce):
    """The checks of ``scatter`` and the op that does it: (op class, its second input, its parameters)."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter() missing required argument 'src' or 'value'")
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    d = input._dim(dim)
    idx = _empty_index(_index_array(index, "scatter", input._data), input)
    if isinstance(src, Tensor):
        if src._data.dtype != input._data.dtype:
            raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
        _check_along("scatter", input, idx, d, src._data.shape)
        src = _scatter_src(src, idx)
        if reduce is not None:
            warnings.warn(SCATTER_REDUCE_WARNING, UserWarning, stacklevel=3)
            return ScatterReduceLegacy, src, {"index": along(idx, d), "ufunc": reduce}
        return Scatter, src, {"index": along(idx, d)}
    _check_along("scatter", input, idx, d)
    src = stored_value(src, input._data.dtype)
    if reduce is not None:
        return ScatterReduceLegacy, src, {"index": along(idx, d), "ufunc": reduce}
    return ScatterValue, src, {"index": along(idx, d)}


_REDUCE_UFUNCS = {
    "sum": "add",
    "mean": "add",
    "prod": "multiply",
    "amax": "maximum",
    "amin": "minimum",
    "max": "maximum",
    "min": "minimum",
}  # PyTorch's forward still takes the old names, not its backward


def _identity(reduce: str, dtype):
    """The value a position starts from when ``include_self=False`` leaves its own value out."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    largest = reduce in ("amax", "max")
    if dtype.kind == "b":
        return not largest
    if kind_of(dtype) == "f":
        return -np.inf if largest else np.inf
    info = np.iinfo(dtype)
    return info.min if largest else info.max


def _scatter_reduce(x, src, index: tuple, reduce: str, include_self: bool):
    """The forward of ``scatter_reduce`` on arrays: (result, count of values per position for 'mean' or None)."""
    xp = xp_of(x)
    out = x.copy()
    if not include_self:
        out[index] = _identity(reduce, x.dtype)
    _ufunc_at(_REDUCE_UFUNCS[reduce], out, index, src)
    if reduce != "mean":
        return out, None
    count = xp.full(x.shape, 1 if include_self else 0, dtype=x.dtype)
    xp.add.at(count, index, 1)
    count[count == 0] = 1
    if kind_of(x.dtype) == "f":
        return out / count, count
    return xp.floor_divide(out, count), count


def _reduce_again(x, src, node: ScatterReduce):
    """``scatter_reduce`` with ``node``'s index and options on other values: arrays, or Tensors (differentiable)."""
    if isinstance(x, Tensor) or isinstance(src, Tensor):
        x = x if isinstance(x, Tensor) else Tensor._make(x)
        src = src if isinstance(src, Tensor) else Tensor._make(src)
        return ScatterReduce.apply(x, src, index=node.index, reduce=node.reduce, include_self=node.include_self)
    return _scatter_reduce(x, src, node.index, node.reduce, node.include_self)[0]


class ScatterReduce(Op, name="ScatterReduceBackward0"):
    """out = x with src reduced ('sum', 'prod', 'mean', 'amax', 'amin') into the indexed positions, x's own value
    taking part unless ``include_self=False``. The gradients follow PyTorch's formulas:

    sum: dx = g,  dsrc = g gathered at index;   mean: both divided by the count of values at each position;
    prod: dx = g * (the product of the others at its position),  dsrc likewise (exact when values are zero);
    amax / amin: g shared evenly among x and the src values equal to the result at each position.
    With ``include_self=False``, dx is zero at the positions that received a value.
    """

    save_inputs = (0, 1)
    save_output = True

    def forward(self, x, src, index, reduce, include_self):
        self.index, self.reduce, self.include_self = index, reduce, include_self
        out, self.count = _scatter_reduce(x, src, index, reduce, include_self)
        return out

    def backward(self, g):
        x, src, out = self.saved_tensors
        index, reduce = self.index, self.reduce
        if reduce in ("max", "min"):
            raise RuntimeError(
                f"Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', 'amin' but got {reduce}."
            )
        xd, sd = dual.data(x), dual.data(src)
        xp = xp_of(xd)
        if reduce == "sum":
            gx, gs = g, g[index]
        elif reduce == "mean":
            gx = g / self.count
            gs = gx[index]
        elif reduce == "prod":
            masked_x = dual.where(xd == 0, 1, x)
            gx = g * _reduce_again(masked_x, src, self) / masked_x
            src_zero = sd == 0
            zeros_at = xp.zeros(xd.shape, dtype=xd.dtype)
            xp.add.at(zeros_at, index, src_zero.astype(xd.dtype))
            single_zero = src_zero & (zeros_at[index] == 1)  # the one zero at its position: its gradient is not 0
            masked_src_result = _reduce_again(x, dual.where(single_zero, 1, src), self)
            gs = dual.where(
                single_zero, (g * masked_src_result)[index], (g * out)[index] / dual.where(src_zero, 1, src)
            )
        else:
            od = dual.data(out)
            x_is = xd == od
            src_is = sd == od[index]
            share = x_is.astype(xd.dtype)
            xp.add.at(share, index, src_is.astype(xd.dtype))
            gd = g / share
            gx = dual.keep(gd, x_is)
            gs = dual.keep(gd[index], src_is)
        if not self.include_self:
            received = xp.zeros(xd.shape, dtype=bool)
            received[index] = True
            gx = dual.keep(gx, ~received)
        return gx, gs


def scatter_reduce(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """A copy of ``input`` with the values of ``src`` reduced along ``dim`` into the positions ``index`` names:
    ``reduce`` is 'sum', 'prod', 'mean', 'amax' or 'amin'; ``include_self=False`` leaves ``input``'s own value out
    of the positions that receive one. Differentiable in ``input`` and ``src``.

    >>> import trainkit
    >>> x = trainkit.tensor([1.0, 2.0, 3.0])
    >>> trainkit.scatter_reduce(x, 0, trainkit.tensor([0, 0, 2]), trainkit.tensor([5.0, 7.0, 9.0]), 'amax')
    tensor([7., 2., 9.])
    >>> trainkit.scatter_reduce(x, 0, trainkit.tensor([0, 0]), trainkit.tensor([5.0, 7.0]), 'mean',
    ...                         include_self=False)
    tensor([6., 2., 3.])
    """
    src, params = _scatter_reduce_op(input, dim, index, src, reduce, include_self)
    return ScatterReduce.apply(input, src, **params)


def scatter_reduce_(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``scatter_reduce`` in place: ``input`` itself, changed (``x.scatter_reduce_(...)``).

    >>> import trainkit
    >>> trainkit.ones(3).scatter_reduce_(0, trainkit.tensor([2, 2]), trainkit.tensor([4.0, 5.0]), 'prod')
    tensor([ 1.,  1., 20.])
    """
    src, params = _scatter_reduce_op(input, dim, index, src, reduce, include_self)
    return apply_inplace(input, ScatterReduce, src, **params)


def _scatter_reduce_op(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool):
    """The checks of ``scatter_reduce``: (src as the op takes it, the op's parameters)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'src' (position 4) must be Tensor, not {type(src).__name__}")
    if reduce not in _REDUCE_UFUNCS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    d = input._dim(dim)
    idx = _empty_index(_index_array(index, "scatter_reduce", input._data), input)
    if src._data.dtype != input._data.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if reduce == "mean" and input._data.dtype.kind == "b":
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    _check_along("scatter_reduce", input, idx, d, src._data.shape)
    return _scatter_src(src, idx), {"index": along(idx, d), "reduce": reduce, "include_self": bool(include_self)}


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of ``input`` with ``src`` added along ``dim`` at ``index`` (repeated indices add up).

    >>> import trainkit
    >>> trainkit.scatter_add(trainkit.zeros(3), 0, trainkit.tensor([0, 0, 2]), trainkit.ones(3))
    tensor([2., 0., 1.])
    """
    src, index = _scatter_add_op(input, dim, index, src)
    return ScatterAdd.apply(input, src, index=index)


def scatter_add_(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``scatter_add`` in place: ``input`` itself, changed (``x.scatter_add_(...)``).

    >>> import trainkit
    >>> trainkit.zeros(3).scatter_add_(0, trainkit.tensor([1, 1]), trainkit.ones(2))
    tensor([0., 2., 0.])
    """
    src, index = _scatter_add_op(input, dim, index, src)
    return apply_inplace(input, ScatterAdd, src, index=index)


def _scatter_add_op(input: Tensor, dim: int, index: Tensor, src: Tensor):
    d = input._dim(dim)
    idx = _empty_index(_index_array(index, "scatter_add", input._data), input)
    if src._data.dtype != input._data.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    _check_along("scatter_add", input, idx, d, src._data.shape)
    return _scatter_src(src, idx), along(idx, d)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of ``input`` along ``dim`` at the positions in the vector ``index``."""
    d = input._dim(dim)
    if not isinstance(index, Tensor):
        raise TypeError(f"index_select(): argument 'index' (position 3) must be Tensor, not {type(index).__name__}")
    if index._data.dtype.kind not in "iu":
        raise RuntimeError("index_select(): Expected dtype int32/int64 for index")
    idx = index._data
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    idx = idx.reshape(-1)
    n = input._data.shape[d] if input._data.ndim else 1
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        if input._data.ndim > 1 and d == 1:  # PyTorch's CPU kernel for dim 1 reports it this way
            first = int(idx[int(bad.argmax())])
            raise RuntimeError(f"INDICES element is out of DATA bounds, id={first} axis_dim={n}")
        raise IndexError(f"index out of range in self: index_select indices must lie in [0, {n}) along dim {dim}")
    if input._data.ndim == 0:
        return Index.apply(input.reshape(1), index=idx, accumulate=True).reshape(())
    return IndexSelect.apply(input, index=(slice(None),) * d + (idx,), accumulate=True)
