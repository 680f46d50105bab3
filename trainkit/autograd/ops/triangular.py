"""Triangles and diagonals of matrices: tril, triu and diag."""

from __future__ import annotations

from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual
from .shape import Index, IndexIntoZeros

__all__ = ["diag", "tril", "triu"]


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
