"""Indexing, rearranging, sorting, scanning and norm ops: gather/scatter, masks, flips and rolls, triangles and
diagonals, topk/sort, cumulative sums and products, products, norms and einsum.

Most of them pick elements by an index computed once in the forward; their backward places the gradient back at
that index (``dual.index_into_zeros``), which works on arrays and on Tensors alike.
"""

from __future__ import annotations

import string
import warnings
from collections import namedtuple

import numpy as np

from ..backend import to_dtype, xp_of
from ..function import Op
from ..tensor import Tensor, _flatten_sizes
from . import dual
from .inplace import apply_inplace
from .shape import Index, IndexIntoZeros, SetItem, cat_grads, getitem, permute

__all__ = [
    "argsort",
    "cumprod",
    "cumsum",
    "diag",
    "dist",
    "einsum",
    "flip",
    "gather",
    "index_select",
    "masked_fill",
    "masked_select",
    "movedim",
    "narrow",
    "nonzero",
    "norm",
    "outer",
    "prod",
    "repeat",
    "roll",
    "scatter",
    "scatter_",
    "scatter_add",
    "scatter_add_",
    "scatter_reduce",
    "scatter_reduce_",
    "select",
    "sort",
    "take_along_dim",
    "tile",
    "topk",
    "tril",
    "triu",
]

topk_result = namedtuple("topk", ["values", "indices"])
sort_result = namedtuple("sort", ["values", "indices"])


# ------------------------------------------------------------------------------------------------- helpers
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


def _along(index, dim: int) -> tuple:
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


def _flip(v, axes: tuple):
    if isinstance(v, Tensor):
        return Flip.apply(v, dims=axes)
    return xp_of(v).flip(v, axis=axes).copy()


def _cumsum(v, axis: int):
    if isinstance(v, Tensor):
        return Cumsum.apply(v, dim=axis, dtype=None)
    return xp_of(v).cumsum(v, axis=axis)


def _cumprod(v, axis: int):
    if isinstance(v, Tensor):
        return Cumprod.apply(v, dim=axis)
    return xp_of(v).cumprod(v, axis=axis)


def _ones_like(v):
    d = dual.data(v)
    return xp_of(d).ones(d.shape, dtype=d.dtype)


def _shift(v, axis: int, reverse: bool):
    """``v`` moved one step along ``axis`` with a one entering: the exclusive running product's input."""
    n = v.shape[axis]
    lead = (slice(None),) * axis
    ones = _ones_like(v)[lead + (slice(0, 1),)]
    if isinstance(v, Tensor):
        ones = Tensor._make(ones)
    if reverse:
        return cat_grads([v[lead + (slice(1, n),)], ones], axis)
    return cat_grads([ones, v[lead + (slice(0, n - 1),)]], axis)


def _prod_others(x, axis: int):
    """For each element, the product of the others along ``axis`` (no division: exact with zeros)."""
    left = _cumprod(_shift(x, axis, False), axis)
    right = _flip(_cumprod(_flip(_shift(x, axis, True), (axis,)), axis), (axis,))
    return left * right


def _total(v):
    """The sum of all of ``v`` as a 0-d array or Tensor."""
    s = v.sum()
    return s if isinstance(v, Tensor) else xp_of(v).asarray(s)


# ------------------------------------------------------------------------------------------ gather and scatter
class Gather(Index, name="GatherBackward0"):
    """out[i][j] = x[index[i][j]][j] (dim 0).   dx = g added at those positions into zeros (repeats add up)."""


class IndexSelect(Index, name="IndexSelectBackward0"):
    """out = x[..., index, ...] along ``dim``.   dx = g added back at index (repeats add up)."""


class MaskedSelect(Index, name="MaskedSelectBackward0"):
    """out = the elements of x where mask holds, as a vector.   dx = g placed back at the mask."""


class Topk(Index, name="TopkBackward0"):
    """values = x at the k largest (or smallest) positions along ``dim``.   dx = g placed back there."""


class Sort(Index, name="SortBackward0"):
    """values = x reordered along ``dim``.   dx = g put back in the original order."""


class Diagonal(Index, name="DiagonalBackward0_copy"):
    """out = the ``offset`` diagonal of a matrix x.   dx = g on that diagonal of zeros."""


class DiagEmbed(IndexIntoZeros, name="DiagEmbedBackward0"):
    """out = a square matrix with v on its ``offset`` diagonal.   dv = that diagonal of g."""


class Scatter(SetItem, name="ScatterBackward0"):
    """out = x with out[index[i][j]][j] = src[i][j] (dim 0).   dx = g with zeros there,  dsrc = g gathered there."""


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
    if input._data.ndim == 0:
        return gather(input.reshape(1), 0, index.reshape(1)).reshape(idx.shape)
    return Gather.apply(input, index=_along(idx, d), accumulate=True)


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
    shape = list(
        np.broadcast_shapes(
            tuple(1 if a == d else n for a, n in enumerate(input._data.shape)),
            tuple(1 if a == d else n for a, n in enumerate(idx.shape)),
        )
    )
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
    idx = _index_array(index, "scatter", input._data)
    if isinstance(src, Tensor):
        if src._data.dtype != input._data.dtype:
            raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
        _check_along("scatter", input, idx, d, src._data.shape)
        src = _scatter_src(src, idx)
        if reduce is not None:
            warnings.warn(SCATTER_REDUCE_WARNING, UserWarning, stacklevel=3)
            return ScatterReduceLegacy, src, {"index": _along(idx, d), "ufunc": reduce}
        return Scatter, src, {"index": _along(idx, d)}
    _check_along("scatter", input, idx, d)
    if reduce is not None:
        return ScatterReduceLegacy, src, {"index": _along(idx, d), "ufunc": reduce}
    return ScatterValue, src, {"index": _along(idx, d)}


_REDUCE_UFUNCS = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum",
                  "max": "maximum", "min": "minimum"}  # PyTorch's forward still takes the old names, not its backward


def _identity(reduce: str, dtype):
    """The value a position starts from when ``include_self=False`` leaves its own value out."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    largest = reduce in ("amax", "max")
    if dtype.kind == "b":
        return not largest
    if dtype.kind == "f":
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
    if x.dtype.kind == "f":
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
            gs = dual.where(single_zero, (g * masked_src_result)[index],
                            (g * out)[index] / dual.where(src_zero, 1, src))
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


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
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


def scatter_reduce_(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
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
    idx = _index_array(index, "scatter_reduce", input._data)
    if src._data.dtype != input._data.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if reduce == "mean" and input._data.dtype.kind == "b":
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    _check_along("scatter_reduce", input, idx, d, src._data.shape)
    return _scatter_src(src, idx), {"index": _along(idx, d), "reduce": reduce, "include_self": bool(include_self)}


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
    idx = _index_array(index, "scatter_add", input._data)
    if src._data.dtype != input._data.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    _check_along("scatter_add", input, idx, d, src._data.shape)
    return _scatter_src(src, idx), _along(idx, d)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of ``input`` along ``dim`` at the positions in the vector ``index``."""
    d = input._dim(dim)
    if not isinstance(index, Tensor) or index._data.dtype.kind not in "iu":
        raise RuntimeError("index_select(): Expected dtype int32/int64 for index")
    idx = index._data
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    idx = idx.reshape(-1)
    n = input._data.shape[d] if input._data.ndim else 1
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
        raise IndexError("index out of range in self")
    if input._data.ndim == 0:
        return Index.apply(input.reshape(1), index=idx, accumulate=True).reshape(())
    return IndexSelect.apply(input, index=(slice(None),) * d + (idx,), accumulate=True)


# ------------------------------------------------------------------------------------------------------- masks
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
    """``input`` with ``value`` (a number or a 0-d tensor) where the boolean ``mask`` (broadcast) holds."""
    _mask_array(mask, "masked_fill_", input._data)
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value._data.ndim} dimension(s)."
            )
        return MaskedFillTensor.apply(input, mask, value)
    return MaskedFill.apply(input, mask, value)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where the boolean ``mask`` holds (the two broadcast), as a vector."""
    m = _mask_array(mask, "masked_select", input._data)
    shape = np.broadcast_shapes(input._data.shape, m.shape)
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


# ------------------------------------------------------------------------------------------- picking slices
def narrow(input: Tensor, dim: int, start, length: int) -> Tensor:
    """``length`` elements of ``input`` along ``dim`` from ``start`` (a view)."""
    d = input._dim(dim)
    if isinstance(start, Tensor):
        start = int(start.item())
    n = input._data.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    start = start % n if start < 0 else start
    if length < 0 or start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return getitem(input, (slice(None),) * d + (slice(start, start + length),))


def select(input: Tensor, dim: int, index: int) -> Tensor:
    """The slice of ``input`` at ``index`` along ``dim``, that dimension removed (a view)."""
    if input._data.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = input._dim(dim)
    n = input._data.shape[d]
    if not -n <= index < n:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input._data.shape)} at dimension {d}"
        )
    return getitem(input, (slice(None),) * d + (int(index),))


def movedim(input: Tensor, source, destination) -> Tensor:
    """``input`` with the dimensions ``source`` moved to positions ``destination`` (a view)."""
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain the same "
            f"number of dims as destination ({list(dst)} dims)"
        )
    nd = input._data.ndim
    src = tuple(input._dim(s) for s in src)
    dst = tuple(input._dim(s) for s in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError("movedim: repeated dim in `source` or `destination`")
    order = [a for a in range(nd) if a not in src]
    for s_, d_ in sorted(zip(dst, src)):
        order.insert(s_, d_)
    if nd == 0:
        return permute(input)
    return permute(input, *order)


# ---------------------------------------------------------------------------------------------- rearranging
class Repeat(Op, name="RepeatBackward0"):
    """out = x tiled ``repeats`` times along each dimension.   dx = the sum of g over the copies."""

    def forward(self, x, repeats):
        self.in_shape = x.shape
        self.repeats = repeats
        lead = len(repeats) - x.ndim
        self.padded = (1,) * lead + tuple(x.shape)
        return xp_of(x).tile(x.reshape(self.padded), repeats)

    def backward(self, g):
        split = []
        for r, n in zip(self.repeats, self.padded):
            split += [r, n]
        g = g.reshape(tuple(split)).sum(axis=tuple(range(0, len(split), 2)))
        return g.reshape(self.in_shape)


def repeat(input: Tensor, *repeats) -> Tensor:
    """``input`` copied ``repeats[i]`` times along each dimension (leading ones added as needed)."""
    repeats = _flatten_sizes(repeats)
    if len(repeats) < input._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    if any(r < 0 for r in repeats):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(repeats)}: {list(repeats)}")
    return Repeat.apply(input, repeats=repeats)


def tile(input: Tensor, *dims) -> Tensor:
    """As ``repeat``, with ones prepended to ``dims`` when it is shorter than the tensor's dimensions."""
    dims = _flatten_sizes(dims)
    dims = (1,) * (input._data.ndim - len(dims)) + dims
    return repeat(input, *dims)


class Flip(Op, name="FlipBackward0"):
    """out = x reversed along ``dims``.   dx = g reversed along them."""

    def forward(self, x, dims):
        self.dims = dims
        return xp_of(x).flip(x, axis=dims).copy() if dims else x.copy()

    def backward(self, g):
        return _flip(g, self.dims) if self.dims else g


def flip(input: Tensor, *dims) -> Tensor:
    """A copy of ``input`` reversed along ``dims``."""
    dims = _flatten_sizes(dims)
    axes = tuple(input._dim(d) for d in dims)
    if len(set(axes)) != len(axes):
        raise RuntimeError(
            f"dims has duplicates, original flip dims size={len(dims)}, but unique flip dims size={len(set(axes))}"
        )
    return Flip.apply(input, dims=axes)


class Roll(Op, name="RollBackward0"):
    """out = x shifted cyclically by ``shifts`` along ``dims`` (the flattened x when None).   dx = g shifted back."""

    def forward(self, x, shifts, dims):
        self.shifts, self.dims = shifts, dims
        return xp_of(x).roll(x, shifts, axis=dims)

    def backward(self, g):
        back = tuple(-s for s in self.shifts) if isinstance(self.shifts, tuple) else -self.shifts
        if isinstance(g, Tensor):
            return Roll.apply(g, shifts=back, dims=self.dims)
        return xp_of(g).roll(g, back, axis=self.dims)


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """``input`` rolled by ``shifts`` along ``dims``; with no ``dims``, the flattened tensor is rolled."""
    if dims is None:
        if not isinstance(shifts, int):
            if len(shifts) != 1:
                raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
            shifts = int(shifts[0])
        return Roll.apply(input, shifts=int(shifts), dims=None)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(int(s) for s in shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    return Roll.apply(input, shifts=shifts, dims=tuple(input._dim(d) for d in dims))


class Tril(Op, name="TrilBackward0"):
    """out = x below (and on) its ``diagonal``-th diagonal, zeros above.   dx = g on the same triangle."""

    upper = False

    def forward(self, x, diagonal):
        xp = xp_of(x)
        rows, cols = x.shape[-2:]
        keep = xp.tri(rows, cols, diagonal - 1 if self.upper else diagonal, dtype=bool)
        self.keep = ~keep if self.upper else keep
        return xp.where(self.keep, x, xp.zeros((), dtype=x.dtype))

    def backward(self, g):
        return dual.keep(g, self.keep)


class Triu(Tril, name="TriuBackward0"):
    """out = x above (and on) its ``diagonal``-th diagonal, zeros below.   dx = g on the same triangle."""

    upper = True


def _triangle(cls, input: Tensor, diagonal: int) -> Tensor:
    if input._data.ndim < 2:
        name = "triu" if cls.upper else "tril"
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    return cls.apply(input, diagonal=int(diagonal))


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the matrices in ``input``; zeros elsewhere."""
    return _triangle(Tril, input, diagonal)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the matrices in ``input``; zeros elsewhere."""
    return _triangle(Triu, input, diagonal)


def _diag_positions(xp, rows: int, cols: int, offset: int) -> tuple:
    if offset >= 0:
        n = max(min(rows, cols - offset), 0)
        r = xp.arange(n)
        return r, r + offset
    n = max(min(rows + offset, cols), 0)
    c = xp.arange(n)
    return c - offset, c


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A vector to a square matrix with it on the ``diagonal``-th diagonal; a matrix to that diagonal."""
    data = input._data
    xp = xp_of(data)
    if data.ndim == 1:
        n = data.shape[0] + abs(diagonal)
        index = _diag_positions(xp, n, n, diagonal)
        return DiagEmbed.apply(input, shape=(n, n), index=index, accumulate=False)
    if data.ndim == 2:
        index = _diag_positions(xp, data.shape[0], data.shape[1], diagonal)
        return Diagonal.apply(input, index=index, accumulate=False)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {data.ndim}D")


# --------------------------------------------------------------------------------------------------- sorting
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
    values = Sort.apply(input, index=_along(order, d), accumulate=False)
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
    values = Topk.apply(input, index=_along(order, d), accumulate=False)
    return topk_result(values, Tensor._make(order.astype(np.int64)))


# -------------------------------------------------------------------------------------- scans and products
class Cumsum(Op, name="CumsumBackward0"):
    """out_i = x_0 + ... + x_i along ``dim``.   dx_i = g_i + ... + g_last (a reversed running sum)."""

    def forward(self, x, dim, dtype):
        self.dim = dim
        return xp_of(x).cumsum(x, axis=dim, dtype=dtype)

    def backward(self, g):
        return _flip(_cumsum(_flip(g, (self.dim,)), self.dim), (self.dim,))


def _int_to_long(input: Tensor, dtype):
    if dtype is not None:
        return to_dtype(dtype).np
    return np.int64 if input._data.dtype.kind in "biu" else None


def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running sums along ``dim``; integers and bools sum to int64."""
    np_dtype = _int_to_long(input, dtype)
    if input._data.ndim == 0:
        input._dim(dim)
        return Cumsum.apply(input.reshape(1), dim=0, dtype=np_dtype).reshape(())
    return Cumsum.apply(input, dim=input._dim(dim), dtype=np_dtype)


class Cumprod(Op, name="CumprodBackward0"):
    """out_i = x_0 * ... * x_i along ``dim``.

    dx_i = sum_{j >= i} g_j prod_{k <= j, k != i} x_k: with no zero in x this is (reversed running sum of g out)_i
    / x_i; with zeros it is computed from the products that leave x_i out, one row per i.
    """

    save_inputs = (0,)
    save_output = True

    def forward(self, x, dim):
        self.dim = dim
        return xp_of(x).cumprod(x, axis=dim)

    def backward(self, g):
        x, out = self.saved_tensors
        d = self.dim
        xd = dual.data(x)
        if not isinstance(g, Tensor) and xd.size and bool((xd != 0).all()):
            return _flip(_cumsum(_flip(g * out, (d,)), d), (d,)) / x
        n = xd.shape[d]
        nd = xd.ndim
        order = tuple(a for a in range(nd) if a != d) + (d,)
        back = tuple(int(i) for i in np.argsort(order))
        xm = dual.permute(x, order)
        gm = dual.permute(g, order)
        lead = tuple(xm.shape[:-1])
        xp = xp_of(xd)
        eye = xp.eye(n, dtype=bool)
        rows = dual.where(eye, 1.0, xm.reshape(lead + (1, n)))  # rows[..., i, k]: x_k with x_i set to 1
        rows = _cumprod(dual.broadcast_to(rows, lead + (n, n)) * 1, nd)
        upper = xp.triu(xp.ones((n, n), dtype=xd.dtype))  # j >= i
        dx = (rows * gm.reshape(lead + (1, n)) * upper).sum(axis=nd)
        return dual.permute(dx, back)


def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running products along ``dim``; integers and bools multiply to int64."""
    np_dtype = _int_to_long(input, dtype)
    if np_dtype is not None and input._data.dtype != np_dtype:
        input = input.to(to_dtype(np_dtype) if dtype is None else dtype)
    if input._data.ndim == 0:
        input._dim(dim)
        return Cumprod.apply(input.reshape(1), dim=0).reshape(())
    return Cumprod.apply(input, dim=input._dim(dim))


class ProdAll(Op, name="ProdBackward0"):
    """out = the product of all of x.   dx_i = g * (product of the others), exact where x has zeros."""

    save_inputs = (0,)

    def forward(self, x, dim, keepdim):
        self.dim, self.keepdim, self.in_shape = dim, keepdim, x.shape
        return x.prod(axis=dim, keepdims=keepdim)

    def backward(self, g):
        (x,) = self.saved_tensors
        if self.dim is None:
            others = _prod_others(x.reshape(-1), 0).reshape(self.in_shape) if len(self.in_shape) else _ones_like(x)
        else:
            others = _prod_others(x, self.dim)
        axes = None if self.dim is None else (self.dim,)
        return dual.keep_dims(g, self.in_shape, axes, self.keepdim) * others


class ProdDim(ProdAll, name="ProdBackward1"):
    pass


def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The product of all elements, or along ``dim``; integers and bools multiply to int64."""
    np_dtype = _int_to_long(input, dtype)
    if np_dtype is not None and input._data.dtype != np_dtype:
        input = input.to(to_dtype(np_dtype) if dtype is None else dtype)
    if dim is None:
        return ProdAll.apply(input, dim=None, keepdim=False)
    if input._data.ndim == 0:
        input._dim(dim)
        return ProdAll.apply(input, dim=None, keepdim=False)
    return ProdDim.apply(input, dim=input._dim(dim), keepdim=bool(keepdim))


# ------------------------------------------------------------------------------------------------------ norms
def _norm_forward(x, p, axes, keepdim):
    xp = xp_of(x)
    a = xp.abs(x)
    if p == float("inf"):
        return (
            a.max(axis=axes, keepdims=keepdim)
            if a.size
            else xp.zeros(() if not keepdim else (1,) * x.ndim, dtype=x.dtype)
        )
    if p == -float("inf"):
        return a.min(axis=axes, keepdims=keepdim)
    if p == 0:
        return (a != 0).sum(axis=axes, keepdims=keepdim).astype(x.dtype)
    if p == 1:
        return a.sum(axis=axes, keepdims=keepdim)
    if p == 2:
        return xp.sqrt((x * x).sum(axis=axes, keepdims=keepdim))
    return (a**p).sum(axis=axes, keepdims=keepdim) ** (1.0 / p)


def _norm_backward(g, x, out, p, in_shape, axes, keepdim):
    """d||x||_p / dx times g, on arrays or Tensors (x and out as saved)."""
    xd = dual.data(x)
    xp = xp_of(xd)
    g = dual.keep_dims(g, in_shape, axes, keepdim)
    out = dual.keep_dims(out, in_shape, axes, keepdim)
    od = dual.data(out)
    sign = xp.sign(xd)
    if p == 0:
        return g * xp.zeros_like(xd)
    if p == 1:
        return g * sign
    if abs(p) == float("inf"):
        hit = (xp.abs(xd) == od).astype(xd.dtype)
        share = hit / hit.sum(axis=axes, keepdims=True)
        return g * (sign * share)
    if p == 2:
        safe = dual.where(od == 0, 1.0, out)
        return dual.keep(g * x / safe, xp.broadcast_to(od != 0, xd.shape))
    safe = dual.where(od == 0, 1.0, out)
    absx = x * sign
    return dual.keep(g * sign * absx ** (p - 1) / safe ** (p - 1), xp.broadcast_to(od != 0, xd.shape))


class VectorNorm(Op, name="LinalgVectorNormBackward0"):
    """out = (sum |x|^p)^(1/p) over ``axes`` (max |x| for p = inf).

    dx = g x / out (p = 2),  g sign(x) (p = 1),  g sign(x) shared among the maxima (p = inf),
    g sign(x) |x|^(p-1) / out^(p-1) otherwise; 0 where out is 0.
    """

    save_inputs = (0,)
    save_output = True

    def forward(self, x, p, axes, keepdim):
        self.p, self.axes, self.keepdim, self.in_shape = p, axes, keepdim, x.shape
        return _norm_forward(x, p, axes, keepdim)

    def backward(self, g):
        x, out = self.saved_tensors
        return _norm_backward(g, x, out, self.p, self.in_shape, self.axes, self.keepdim)


class Dist(Op, name="DistBackward0"):
    """out = ||x - y||_p.   dx = the norm's gradient at x - y,  dy = its negative."""

    save_inputs = (0, 1)
    save_output = True

    def forward(self, x, y, p):
        self.p = p
        diff = x - y
        self.in_shape = diff.shape
        return _norm_forward(diff, p, None, False)

    def backward(self, g):
        x, y, out = self.saved_tensors
        gd = _norm_backward(g, x - y, out, self.p, self.in_shape, None, False)
        return gd, -gd


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """The p-norm of ``input`` over ``dim`` (all dimensions when None), as ``torch.norm``.

    ``p`` is a number (2, 1, inf, -inf, 0, any other) for the vector norm of the elements; 'fro' is the same as 2
    (over at most two dimensions); 'nuc' is the nuclear norm, the sum of the singular values of the matrices over
    the two dimensions ``dim`` (the last two of a 2-D input when None).

    >>> import trainkit
    >>> trainkit.norm(trainkit.tensor([[3.0, 0.0], [0.0, -4.0]]), 'nuc')
    tensor(7.)
    >>> trainkit.norm(trainkit.tensor([[3.0, 4.0], [0.0, 0.0]]), 'fro', dim=1)
    tensor([5., 0.])
    """
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            p = 2.0
        else:
            return _matrix_norm(input, p, dim, keepdim, dtype)
    if input._data.dtype.kind != "f":
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got " + _dtype_name(input)
        )
    if dtype is not None:
        input = input.to(dtype)
    pv = 2.0 if p is None else float(p)
    if dim is None:
        axes = None
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        axes = tuple(sorted({input._dim(d) for d in dims})) or None
    if input._data.ndim == 0:
        axes = None
    return VectorNorm.apply(input, p=pv, axes=axes, keepdim=bool(keepdim))


def _dtype_name(t: Tensor) -> str:
    names = {"float16": "Half", "float32": "Float", "float64": "Double", "int8": "Char", "uint8": "Byte",
             "int16": "Short", "int32": "Int", "int64": "Long", "bool": "Bool"}
    return names[t.dtype.name]


def _matrix_norm(input: Tensor, order: str, dim, keepdim: bool, dtype) -> Tensor:
    """``linalg.matrix_norm`` for the orders ``torch.norm`` passes on to it: 'nuc', and 'fro' over more than two
    dimensions (which is an error there too)."""
    if input._data.dtype.kind != "f":
        raise RuntimeError(
            "linalg.matrix_norm: Expected a floating point or complex tensor as input. Got " + _dtype_name(input)
        )
    if order not in ("fro", "nuc"):
        raise RuntimeError(f"linalg.matrix_norm: Order {order} not supported.")
    if input._data.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    dims = list(range(input._data.ndim)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    if len(dims) != 2:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got " + " ".join(str(d) for d in dims))
    d0, d1 = input._dim(dims[0]), input._dim(dims[1])
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    if dtype is not None:
        input = input.to(dtype)
    from .linalg import svdvals
    from .reduction import sum as tsum

    nd = input._data.ndim
    matrices = input if (d0, d1) == (nd - 2, nd - 1) else movedim(input, (d0, d1), (-2, -1))
    if not keepdim:
        return tsum(svdvals(matrices), -1)
    return movedim(tsum(svdvals(matrices), -1, keepdim=True).unsqueeze(-1), (nd - 2, nd - 1), (d0, d1))


def dist(input: Tensor, other: Tensor, p=2) -> Tensor:
    """The p-norm of ``input - other`` (the two broadcast)."""
    from .math import promote

    input, other = promote(input, other)
    return Dist.apply(input, other, p=float(p))


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two vectors: ``out[i, j] = input[i] * vec2[j]``."""
    for name, v in (("self", input), ("vec2", vec2)):
        if v._data.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v._data.ndim}-D")
    return input.reshape(-1, 1) * vec2


# ----------------------------------------------------------------------------------------------------- einsum
def _scan_subscripts(part: str, offset: int, what: str) -> list:
    """The labels of one side of an einsum equation (``'...'`` kept as one item), with PyTorch's errors."""
    labels: list = []
    found = False
    i = 0
    while i < len(part):
        c = part[i]
        if c == ".":
            if found:
                tail = " but an ellipsis (...) was already found" if what == "output" else (
                    " for which an ellipsis was already found")
                raise RuntimeError(f"einsum(): found '.' for {what}{tail}")
            if not (i + 2 < len(part) and part[i + 1] == "." and part[i + 2] == "."):
                tail = " (...)" if what == "output" else ""
                raise RuntimeError(f"einsum(): found '.' for {what} that is not part of any ellipsis{tail}")
            labels.append("...")
            found = True
            i += 2
        elif c in string.ascii_letters:
            labels.append(c)
        elif c != " ":
            raise RuntimeError(
                f"einsum(): invalid subscript given at index {offset + i} in the equation string, subscripts must "
                "be in [a-zA-Z]"
            )
        i += 1
    return labels


def _parse_einsum(equation: str, operands: tuple) -> tuple[list[str], str, list]:
    """The equation with every ``...`` spelled out in letters of its own, so that the op and its backward only see
    letters: (input subscripts, output subscripts, operands expanded where a size-1 dimension broadcasts)."""
    lhs, arrow, rhs = equation.partition("->")
    parts = lhs.split(",")
    n = len(operands)
    if len(parts) != n:
        raise RuntimeError(
            "einsum(): more operands were provided than specified in the equation"
            if n > len(parts)
            else "einsum(): fewer operands were provided than specified in the equation"
        )
    ins, ell_dims, offset = [], [], 0
    for k, (part, t) in enumerate(zip(parts, operands)):
        labels = _scan_subscripts(part, offset, f"operand {k}")
        offset += len(part) + 1
        nd = t._data.ndim
        named = len(labels) - ("..." in labels)
        if "..." in labels:
            if named > nd:
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({named}) is more than the number of "
                    f"dimensions ({nd}) for operand {k}"
                )
            ell_dims.append(nd - named)
        else:
            if named != nd:
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({named}) does not match the number of "
                    f"dimensions ({nd}) for operand {k} and no ellipsis was given"
                )
            ell_dims.append(0)
        ins.append(labels)
    n_ell = max(ell_dims, default=0)
    unused = [c for c in string.ascii_letters if c not in equation]
    if n_ell > len(unused):
        raise RuntimeError("einsum(): the ellipsis covers more dimensions than there are unused letters")
    ell = "".join(unused[:n_ell])
    subs = ["".join(ell[n_ell - e:] if c == "..." else c for c in labels) for labels, e in zip(ins, ell_dims)]
    if arrow:
        out_labels = _scan_subscripts(rhs, len(lhs) + 2, "output")
        out = "".join(ell if c == "..." else c for c in out_labels)
        seen = "".join(subs)
        for i, c in enumerate(out):
            if c not in seen:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   "operand")
            if c in out[:i]:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
    else:
        letters = "".join(subs)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return subs, out, _broadcast_operands(subs, list(operands), ell)


def _broadcast_operands(subs: list, operands: list, ell: str) -> list:
    """Operands whose size-1 dimensions meet a larger size of the same letter elsewhere, expanded to it."""
    sizes: dict = {}
    for k, (sub, t) in enumerate(zip(subs, operands)):
        for pos, (c, size) in enumerate(zip(sub, t._data.shape)):
            first = sub.index(c)
            if first < pos and t._data.shape[first] != size:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but the sizes don't match, "
                                   f"{size} != {t._data.shape[first]}")
            seen = sizes.get(c)
            if seen is not None and size != seen and 1 not in (size, seen):
                if c in ell:
                    raise RuntimeError(
                        f"einsum(): dimension {ell.index(c)} covered by ellipsis in operand {k}has size {size} which "
                        f"does not broadcast with previously seen ellipsis with size {seen} for the respective "
                        "dimension"
                    )
                raise RuntimeError(f"einsum(): subscript {c} has size {size} for operand {k} which does not "
                                   f"broadcast with previously seen size {seen}")
            if seen is None or seen == 1:
                sizes[c] = size
    for k, (sub, t) in enumerate(zip(subs, operands)):
        target = tuple(sizes[c] for c in sub)
        if target != t._data.shape:
            operands[k] = t.expand(*target)
    return operands


def _einsum(eq: str, operands: list):
    """numpy/cupy einsum, or the differentiable op when an operand is a Tensor (constants wrapped)."""
    if any(isinstance(o, Tensor) for o in operands):
        return Einsum.apply(*[o if isinstance(o, Tensor) else Tensor._make(o) for o in operands], equation=eq)
    xp = xp_of(operands[0])
    return xp.einsum(eq, *operands, optimize=len(operands) > 2)


class Einsum(Op, name="EinsumBackward0"):
    """out = einsum(equation, *xs).

    dx_k = einsum of g (output subscripts) with the other operands into x_k's subscripts; a letter only x_k has
    is broadcast with a vector of ones, and a letter repeated in x_k is put on a diagonal with an identity.
    """

    save_inputs = tuple(range(32))

    def forward(self, *xs, equation):
        self.equation = equation
        self.shapes = [x.shape for x in xs]
        xp = xp_of(xs[0])
        return xp.asarray(xp.einsum(equation, *xs, optimize=len(xs) > 2))

    @classmethod
    def apply(cls, *inputs, equation):
        klass = _einsum_class(len(inputs))
        return Op.apply.__func__(klass, *inputs, equation=equation)

    def backward(self, g):
        xs = self.saved_tensors
        ins, out = self.equation.split("->")
        ins = ins.split(",")
        sizes = {}
        for sub, shape in zip(ins, self.shapes):
            sizes.update(zip(sub, shape))
        free = iter(c for c in string.ascii_letters if c not in sizes)
        grads = []
        for k, sub in enumerate(ins):
            if self.next_functions[k][0] is None:
                grads.append(None)
                continue
            xd = dual.data(xs[k])
            xp = xp_of(xd)
            subs, ops = [out], [g]
            for j, s in enumerate(ins):
                if j != k:
                    subs.append(s)
                    ops.append(xs[j])
            have = set("".join(subs))
            target = ""
            for c in sub:
                if c in target:
                    new = next(free)
                    subs.append(c + new)
                    ops.append(xp.eye(sizes[c], dtype=xd.dtype))
                    target += new
                else:
                    if c not in have:
                        subs.append(c)
                        ops.append(xp.ones(sizes[c], dtype=xd.dtype))
                        have.add(c)
                    target += c
            grads.append(_einsum(",".join(subs) + "->" + target, ops))
        return tuple(grads)


_EINSUM_CLASSES: dict = {}


def _einsum_class(n: int):
    """Einsum with ``save_inputs`` set to its ``n`` operands."""
    if n not in _EINSUM_CLASSES:
        _EINSUM_CLASSES[n] = type("EinsumBackward0", (Einsum,), {"save_inputs": tuple(range(n))})
    return _EINSUM_CLASSES[n]


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation: ``einsum('ij,jk->ik', a, b)`` is ``a @ b``. Without '->' the output holds the
    dimensions under ``...`` and then the letters that appear once, in alphabetical order. ``...`` stands for the
    dimensions not named by letters; they broadcast across operands, as do any size-1 dimensions.

    >>> import trainkit
    >>> a, b = trainkit.ones(5, 2, 3), trainkit.ones(3, 4)
    >>> trainkit.einsum('...ij,jk->...ik', a, b).shape
    trainkit.Size([5, 2, 4])
    >>> trainkit.einsum('bij->ji', a).shape
    trainkit.Size([3, 2])
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ins, out, operands = _parse_einsum(equation, operands)
    dtype = operands[0]._data.dtype
    if any(t._data.dtype != dtype for t in operands):
        from .math import promote

        ops = list(operands)
        for i in range(1, len(ops)):
            ops[0], ops[i] = promote(ops[0], ops[i])
        operands = tuple(o if o._data.dtype == ops[0]._data.dtype else promote(ops[0], o)[1] for o in ops)
    return Einsum.apply(*operands, equation=",".join(ins) + "->" + out)
