"""Ops that move elements without computing on them: reshaping, transposing, expanding, indexing (joining and
splitting live in ``join`` and are re-exported here).

Views (reshape, transpose, permute, expand, basic indexing) share their input's storage when NumPy can make them
without a copy, and then its version counter too, so an in-place change through one is seen by both.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..backend import dtype, sum_to, to_dtype, xp_of
from ..function import Op
from ..tensor import Tensor, flatten_sizes
from . import dual
from .index_key import ALL, normalize_index
from .join import (  # noqa: F401  (re-exported: the joining ops are shape ops, imported from here elsewhere)
    cat,
    cat_grads,
    chunk,
    concat,
    concatenate,
    split,
    stack,
    stack_grads,
    unbind,
)

__all__ = [
    "cat",
    "chunk",
    "concat",
    "concatenate",
    "expand",
    "expand_as",
    "flatten",
    "permute",
    "reshape",
    "split",
    "squeeze",
    "stack",
    "sum_to_size",
    "swapaxes",
    "swapdims",
    "t",
    "transpose",
    "unbind",
    "unsqueeze",
    "view",
]


# The gradient form of indexing into zeros, on arrays (the plain pass) and on Tensors (create_graph, where it is the
# op below): the backward of indexing here, and of ops elsewhere.
def index_into_zeros(g, shape: tuple, index, accumulate: bool):
    """A zero array (or Tensor) of ``shape`` with ``g`` added at ``index``: the backward of indexing."""
    if isinstance(g, Tensor):
        return IndexIntoZeros.apply(g, shape=shape, index=index, accumulate=accumulate)
    xp = xp_of(g)
    out = xp.zeros(shape, dtype=g.dtype)
    if accumulate:
        xp.add.at(out, index, g)
    else:
        out[index] = g
    return out


class View(Op, name="ViewBackward0"):
    """out = x with a new shape.   dx = g with x's shape."""

    is_view = True

    def forward(self, x, shape):
        self.in_shape = x.shape
        return x.reshape(shape)

    def backward(self, g):
        return g.reshape(self.in_shape)


class UnsafeView(View, name="UnsafeViewBackward0"):
    """A reshape that had to copy (the input's layout allowed no view)."""

    is_view = False


class ReshapeAlias(View, name="ReshapeAliasBackward0"):
    """A reshape of a non-contiguous tensor whose layout allows a view."""


class SqueezeAll(View, name="SqueezeBackward0"):
    pass


class SqueezeDims(View, name="SqueezeBackward1"):
    pass


class SqueezeMany(View, name="SqueezeBackward2"):
    pass


class Unsqueeze(View, name="UnsqueezeBackward0"):
    pass


class Transpose(Op, name="TransposeBackward0"):
    """out = x with dimensions d0 and d1 swapped.   dx = g with them swapped back."""

    is_view = True

    def forward(self, x, d0, d1):
        self.dims = (d0, d1)
        return x.swapaxes(d0, d1)

    def backward(self, g):
        return g.swapaxes(*self.dims)


class T(Transpose, name="TBackward0"):
    pass


class ScalarTranspose(View, name="TransposeBackward0"):
    """transpose of a 0-d tensor: the tensor itself, as a view."""


class ScalarT(View, name="TBackward0"):
    """t() of a tensor of fewer than two dimensions: the tensor itself, as a view."""


class Permute(Op, name="PermuteBackward0"):
    """out = x with dimensions reordered by ``dims``.   dx = g with the inverse order."""

    is_view = True

    def forward(self, x, dims):
        self.inverse = tuple(int(i) for i in np.argsort(dims))
        return x.transpose(dims)

    def backward(self, g):
        return dual.permute(g, self.inverse)


class Expand(Op, name="ExpandBackward0"):
    """out = x broadcast to ``shape`` without copying.   dx = g summed over the broadcast dimensions (by the engine)."""

    is_view = True

    def forward(self, x, shape):
        return xp_of(x).broadcast_to(x, shape)

    def backward(self, g):
        return g


class SumTo(Op, name="SumToBackward0"):
    """out = x summed down to ``shape`` (undoes broadcasting).   dx = g broadcast back to x's shape."""

    def forward(self, x, shape):
        self.in_shape = x.shape
        return sum_to(x, shape)

    def backward(self, g):
        return dual.broadcast_to(g, self.in_shape)


def sum_to_size(input: Tensor, *size) -> Tensor:
    """``input`` summed down to ``size`` (a shape it broadcasts to), as ``Tensor.sum_to_size``.

    >>> import trainkit
    >>> trainkit.ones(2, 3).sum_to_size(1, 3)
    tensor([[2., 2., 2.]])
    """
    shape = flatten_sizes(size)
    have = input._data.shape
    if have == shape:
        return input
    lead = len(have) - len(shape)
    if lead < 0 or any(s != 1 and s != n for s, n in zip(shape, have[lead:])):
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size {{{list(have)}}}.")
    # as PyTorch: a sum over the leading and the broadcast dimensions kept as size 1, then a view without the leading
    dims = tuple(range(lead)) + tuple(i for i in range(lead, len(have)) if shape[i - lead] == 1 and have[i] != 1)
    out = input.sum(dims, keepdim=True) if dims else input
    return View.apply(out, shape=shape) if lead else out


class Slice(Op, name="SliceBackward0"):
    """out = x[index] (basic indexing: a view).   dx = g placed at index in zeros."""

    is_view = True

    def forward(self, x, index):
        self.in_shape, self.index = x.shape, index
        out = x[index]
        if type(out) is not type(x):  # NumPy returns a scalar copy for x[i] on a vector: ask for a 0-d view
            out = x[(index if isinstance(index, tuple) else (index,)) + (Ellipsis,)]
        return out

    def backward(self, g):
        return index_into_zeros(g, self.in_shape, self.index, False)


class Select(Slice, name="SelectBackward0"):
    pass


class Index(Op, name="IndexBackward0"):
    """out = x[index] (advanced indexing: a copy).   dx = g added at index into zeros (repeats add up)."""

    def forward(self, x, index, accumulate):
        self.in_shape, self.accumulate = x.shape, accumulate
        self.extra = index
        return x[index]

    def backward(self, g):
        return index_into_zeros(g, self.in_shape, self.extra, self.accumulate)


class IndexIntoZeros(Op, name="IndexPutBackward0"):
    """out = zeros(shape) with g added at index.   dg = gg[index]."""

    def forward(self, g, shape, index, accumulate):
        self.index = index
        return index_into_zeros(g, shape, index, accumulate)

    def backward(self, gg):
        return gg[self.index]


class SetItem(Op, name="CopySlices"):
    """out = x with out[index] = value.   dx = g with zeros at index,  dvalue = g[index]."""

    def forward(self, x, value, index):
        self.index = index
        self.value_shape = getattr(value, "shape", ())
        out = x.copy()
        out[index] = value
        return out

    def backward(self, g):
        index = self.index
        if isinstance(g, Tensor):
            keep = xp_of(g._data).ones(g._data.shape, dtype=g._data.dtype)
            keep[index] = 0
            gx = g * keep
        else:
            gx = g.copy()
            gx[index] = 0
        gv = None
        if self.next_functions[1][0] is not None:
            gv = g[index]
            size = int(np.prod(self.value_shape)) if self.value_shape else 1
            if len(gv.shape) < len(self.value_shape) and size == int(np.prod(gv.shape)):
                gv = gv.reshape(self.value_shape)
        return gx, gv


class IndexPut(SetItem, name="IndexPutBackward0"):
    """``x[index] = value`` with tensor (advanced) indices."""


# --------------------------------------------------------------------------------------------------- indexing
class Alias(Slice, name="AliasBackward0"):
    """``x[...]``, ``x[:]``: the whole tensor as a view."""


class SliceUnsqueeze(Slice, name="UnsqueezeBackward0"):
    """Basic indexing whose last step adds a dimension (``x[0, None]``)."""


def _basic_class(index):
    """The node of basic indexing, named as PyTorch names its last step: select, slice, unsqueeze or alias."""
    parts = index if type(index) is tuple else (index,)
    for p in reversed(parts):
        if p is Ellipsis:
            continue
        if p is None:
            return SliceUnsqueeze
        if type(p) is int:
            return Select
        if p != ALL:
            return Slice
    return Alias


def _only_new_axis(index) -> bool:
    """True for ``x[None]``, ``x[:, None]``: one new axis among full slices, which PyTorch records as unsqueeze."""
    parts = index if isinstance(index, tuple) else (index,)
    return parts.count(None) == 1 and all(p is None or p == slice(None) for p in parts)


def getitem(input: Tensor, key) -> Tensor:
    """``input[key]`` with PyTorch's indexing rules; basic indexing gives a view."""
    index, kind = normalize_index(key, input._data)
    if kind == "slice" and _only_new_axis(index):
        parts = index if isinstance(index, tuple) else (index,)
        return unsqueeze(input, parts.index(None))
    try:
        if kind == "select" or kind == "slice":
            return _basic_class(index).apply(input, index=index)
        return Index.apply(input, index=index, accumulate=kind == "index" or kind == "view-index")
    except IndexError as err:
        raise IndexError(f"{err} (indexing a tensor of shape {tuple(input.shape)})") from None


# ------------------------------------------------------------------------------------------------- reshaping
def _target_shape(input: Tensor, shape) -> tuple:
    """``shape`` checked against ``input``'s size, its -1 filled in."""
    shape = flatten_sizes(shape)
    size = input._data.size
    known = int(np.prod([s for s in shape if s != -1])) if shape else 1
    if shape.count(-1) > 1 or (-1 in shape and (known == 0 or size % known)) or (-1 not in shape and known != size):
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {size}")
    if -1 in shape:
        shape = tuple(size // known if s == -1 else s for s in shape)
    return shape


def _viewable(data, shape) -> bool:
    """True when ``data`` (not C-contiguous) can take ``shape`` without a copy (PyTorch's stride rule for view)."""
    if type(data) is np.ndarray:
        try:
            np.reshape(data, shape, copy=False)
            return True
        except ValueError:
            return False
    return bool(xp_of(data).may_share_memory(data.reshape(shape), data))


def reshape(input: Tensor, *shape) -> Tensor:
    """The same elements in a new shape (one dimension may be -1): a view when the layout allows, else a copy.

    >>> import trainkit
    >>> trainkit.arange(6).reshape(2, -1).shape
    trainkit.Size([2, 3])
    """
    shape = _target_shape(input, shape)
    data = input._data
    if data.flags.c_contiguous:
        return View.apply(input, shape=shape)
    return (ReshapeAlias if _viewable(data, shape) else UnsafeView).apply(input, shape=shape)


def view(input: Tensor, *shape) -> Tensor:
    """The same storage in a new shape; a layout that allows no view raises, as in PyTorch. ``view(dtype)``
    reinterprets the bytes as another dtype (no gradient flows through that)."""
    if len(shape) == 1 and isinstance(shape[0], (dtype, str, type, np.dtype)):
        return _view_dtype(input, to_dtype(shape[0]))
    shape = _target_shape(input, shape)
    data = input._data
    if not data.flags.c_contiguous and data.size and not _viewable(data, shape):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans across "
            "two contiguous subspaces). Use .reshape(...) instead."
        )
    return View.apply(input, shape=shape)


def _view_dtype(input: Tensor, dt) -> Tensor:
    data = input._data
    if dt.np == data.dtype:
        return View.apply(input, shape=data.shape)
    if dt.np.itemsize != data.dtype.itemsize:
        if data.ndim == 0:
            raise RuntimeError(f"self.dim() cannot be 0 to view {input.dtype} as {dt} (different element sizes)")
        if data.ndim and data.strides[-1] != data.itemsize:
            raise RuntimeError(
                f"self.stride(-1) must be 1 to view {input.dtype} as {dt} (different element sizes), "
                f"but got {data.strides[-1] // data.itemsize}"
            )
    try:
        out = data.view(dt.np)
    except ValueError as err:
        raise RuntimeError(str(err)) from None
    return Tensor._make(out, False, None, 0, input._version_counter)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dimensions ``start_dim`` .. ``end_dim`` into one (``input`` itself when there is nothing to merge)."""
    shape = input._data.shape
    s, e = input._dim(start_dim), input._dim(end_dim)
    if not shape:
        return reshape(input, 1)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    merged = int(np.prod(shape[s : e + 1]))
    return reshape(input, shape[:s] + (merged,) + shape[e + 1 :])


def squeeze(input: Tensor, dim=None) -> Tensor:
    """Remove dimensions of size 1 (only ``dim``, an int or tuple, when given)."""
    shape = input._data.shape
    if dim is None:
        return SqueezeAll.apply(input, shape=tuple(n for n in shape if n != 1))
    dims = {input._dim(d) for d in ((dim,) if isinstance(dim, int) else dim)}
    cls = SqueezeDims if isinstance(dim, int) else SqueezeMany
    return cls.apply(input, shape=tuple(n for i, n in enumerate(shape) if not (i in dims and n == 1)))


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a dimension of size 1 at ``dim``."""
    n = input._data.ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    dim %= n
    shape = input._data.shape
    return Unsqueeze.apply(input, shape=shape[:dim] + (1,) + shape[dim:])


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dimensions (on a 0-d tensor, dims 0 and -1 name the tensor itself)."""
    d0, d1 = input._dim(dim0), input._dim(dim1)
    if input._data.ndim == 0:
        return ScalarTranspose.apply(input, shape=())
    return Transpose.apply(input, d0=d0, d1=d1)


swapaxes = swapdims = transpose


def t(input: Tensor) -> Tensor:
    """Transpose a matrix (0-D and 1-D tensors come back as they are)."""
    if input._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input._data.ndim}D")
    if input._data.ndim < 2:
        return ScalarT.apply(input, shape=input._data.shape)
    return T.apply(input, d0=0, d1=1)


def matrix_transpose(input: Tensor) -> Tensor:
    """``x.mT``: the last two dimensions swapped. A 0-D tensor comes back itself, as in PyTorch (which deprecates
    that); a 1-D one is refused.

    >>> import trainkit
    >>> trainkit.ones(4, 2, 3).mT.shape
    trainkit.Size([4, 3, 2])
    """
    nd = input._data.ndim
    if nd == 0:
        warnings.warn(
            "Tensor.mT is deprecated on 0-D tensors. This function is the identity in these cases.",
            UserWarning,
            stacklevel=3,
        )
        return input
    if nd == 1:
        raise RuntimeError(
            "tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor. Use x.unsqueeze(0).mT "
            "for a column"
        )
    return transpose(input, -2, -1)


def permute(input: Tensor, *dims) -> Tensor:
    """Reorder dimensions: ``permute(2, 0, 1)``."""
    dims = flatten_sizes(dims)
    if len(dims) != input._data.ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length of the "
            f"desired ordering of dimensions i.e. input.dim() = {input._data.ndim} is not equal to len(dims) = "
            f"{len(dims)}"
        )
    return Permute.apply(input, dims=tuple(input._dim(d) for d in dims))


def expand(input: Tensor, *sizes) -> Tensor:
    """Broadcast to ``sizes`` without copying; -1 keeps a dimension as it is."""
    sizes = flatten_sizes(sizes)
    shape = input._data.shape
    if len(sizes) < len(shape):
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({len(shape)})"
        )
    lead = len(sizes) - len(shape)
    target = []
    for i, s in enumerate(sizes):
        have = shape[i - lead] if i >= lead else None
        if s == -1:
            if have is None:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            s = have
        elif have is not None and have != s and have != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size ({have}) at non-singleton "
                f"dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(shape)}"
            )
        target.append(s)
    return Expand.apply(input, shape=tuple(target))


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return expand(input, *other.shape)
