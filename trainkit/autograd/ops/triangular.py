"""Triangles and diagonals of matrices: tril, triu, diag and diagonal."""

from __future__ import annotations

import numpy as np

from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual
from .shape import Index, IndexIntoZeros

__all__ = ["diag", "diagonal", "tril", "triu"]


class Diagonal(Index, name="DiagonalBackward0_copy"):
    """out = the ``offset`` diagonal of a matrix x.   dx = g on that diagonal of zeros."""


class DiagEmbed(IndexIntoZeros, name="DiagEmbedBackward0"):
    """out = a square matrix with v on its ``offset`` diagonal.   dv = that diagonal of g."""


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


def _diagonal_of(array, offset: int, dim1: int, dim2: int):
    """The diagonal of ``array`` as a view that can be written into (NumPy hands it out read-only)."""
    xp = xp_of(array)
    out = xp.diagonal(array, offset, dim1, dim2)
    if xp is np and not out.flags.writeable and array.flags.writeable:  # CuPy's views are writable, flagless
        out.flags.writeable = True
    return out


class DiagonalView(Op, name="DiagonalBackward0"):
    """out = the ``offset`` diagonal of x over dimensions dim1 and dim2, as the last dimension (a view).
    dx = zeros with g on that diagonal."""

    is_view = True

    def forward(self, x, offset, dim1, dim2):
        self.in_shape, self.dims = x.shape, (offset, dim1, dim2)
        return _diagonal_of(x, offset, dim1, dim2)

    def backward(self, g):
        if isinstance(g, Tensor):
            return DiagonalScatter.apply(g, shape=self.in_shape, dims=self.dims)
        out = xp_of(g).zeros(self.in_shape, dtype=g.dtype)
        _diagonal_of(out, *self.dims)[...] = g
        return out


class DiagonalScatter(Op, name="DiagonalBackwardBackward0"):
    """out = zeros of ``shape`` with g on the diagonal ``dims`` names (diagonal's backward, recorded for double
    backward).   dg = that diagonal of gg."""

    def forward(self, g, shape, dims):
        self.dims = dims
        out = xp_of(g).zeros(shape, dtype=g.dtype)
        _diagonal_of(out, *dims)[...] = g
        return out

    def backward(self, gg):
        offset, dim1, dim2 = self.dims
        if isinstance(gg, Tensor):
            return DiagonalView.apply(gg, offset=offset, dim1=dim1, dim2=dim2)
        return xp_of(gg).diagonal(gg, offset, dim1, dim2).copy()


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The ``offset``-th diagonal over dimensions ``dim1`` and ``dim2`` (above the main one for offset > 0), as a
    view whose last dimension runs along the diagonal.

    >>> import trainkit
    >>> diagonal(trainkit.tensor([[1, 2], [3, 4]]))
    tensor([1, 4])
    """
    d1, d2 = input._dim(dim1), input._dim(dim2)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return DiagonalView.apply(input, offset=int(offset), dim1=d1, dim2=d2)
