"""Picking and rearranging along dimensions: narrow, select and movedim (views), repeat, tile, flip and roll."""

from __future__ import annotations

from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor, flatten_sizes
from .shape import getitem, permute

__all__ = ["flip", "fliplr", "flipud", "moveaxis", "movedim", "narrow", "repeat", "roll", "select", "tile"]


def flip_grads(v, axes: tuple):
    if isinstance(v, Tensor):
        return Flip.apply(v, dims=axes)
    return xp_of(v).flip(v, axis=axes).copy()


# ------------------------------------------------------------------------------------------- picking slices
def narrow(input: Tensor, dim: int, start, length: int) -> Tensor:
    """``length`` elements of ``input`` along ``dim`` from ``start`` (a view)."""
    if input._data.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
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
        return getitem(input, Ellipsis)  # PyTorch: an alias of the 0-d tensor
    return permute(input, *order)


moveaxis = movedim  # NumPy's name, which PyTorch keeps as an alias


# ---------------------------------------------------------------------------------------------------------- rearranging
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
    repeats = flatten_sizes(repeats)
    if len(repeats) < input._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    if any(r < 0 for r in repeats):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(repeats)}: {list(repeats)}")
    return Repeat.apply(input, repeats=repeats)


def tile(input: Tensor, *dims) -> Tensor:
    """As ``repeat``, with ones prepended to ``dims`` when it is shorter than the tensor's dimensions."""
    dims = flatten_sizes(dims)
    dims = (1,) * (input._data.ndim - len(dims)) + dims
    return repeat(input, *dims)


class Flip(Op, name="FlipBackward0"):
    """out = x reversed along ``dims``.   dx = g reversed along them."""

    def forward(self, x, dims):
        self.dims = dims
        return xp_of(x).flip(x, axis=dims).copy() if dims and x.ndim else x.copy()

    def backward(self, g):
        return flip_grads(g, self.dims) if self.dims and g.ndim else g


def flip(input: Tensor, *dims) -> Tensor:
    """A copy of ``input`` reversed along ``dims``."""
    dims = flatten_sizes(dims)
    axes = tuple(input._dim(d) for d in dims)
    if len(set(axes)) != len(axes):
        raise RuntimeError(
            f"dims has duplicates, original flip dims size={len(dims)}, but unique flip dims size={len(set(axes))}"
        )
    return Flip.apply(input, dims=axes)


def fliplr(input: Tensor) -> Tensor:
    """A copy of ``input`` (at least 2-D) reversed left to right, along dimension 1.

    >>> import trainkit
    >>> fliplr(trainkit.tensor([[1, 2], [3, 4]]))
    tensor([[2, 1],
            [4, 3]])
    """
    if input._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return Flip.apply(input, dims=(1,))


def flipud(input: Tensor) -> Tensor:
    """A copy of ``input`` (at least 1-D) reversed upside down, along dimension 0.

    >>> import trainkit
    >>> flipud(trainkit.tensor([1, 2, 3]))
    tensor([3, 2, 1])
    """
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return Flip.apply(input, dims=(0,))


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
    if input._data.ndim == 0 and dims:
        raise IndexError(
            f"Dimension specified as {dims[0]} but tensor has no dimensions: roll a 0-d tensor with dims=None"
        )
    return Roll.apply(input, shifts=shifts, dims=tuple(input._dim(d) for d in dims))
