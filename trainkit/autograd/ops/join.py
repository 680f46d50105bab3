"""Joining and splitting along a dimension: cat, stack, unbind, split and chunk, with the gradient forms of joining
that other ops' backward passes use (on arrays, and on Tensors under create_graph)."""

from __future__ import annotations

import numpy as np

from ..backend import dtype_of, result_type, xp_of
from ..function import Op
from ..tensor import Tensor

__all__ = ["cat", "chunk", "concat", "concatenate", "hstack", "split", "stack", "unbind", "vstack"]


def stack_grads(grads, dim: int):
    """``grads`` (arrays or Tensors) stacked along a new ``dim``."""
    if isinstance(grads[0], Tensor):
        return stack(grads, dim)
    return xp_of(grads[0]).stack(grads, axis=dim)


def cat_grads(grads, dim: int):
    """``grads`` (arrays or Tensors) joined along ``dim``."""
    if isinstance(grads[0], Tensor):
        return cat(grads, dim)
    return xp_of(grads[0]).concatenate(grads, axis=dim)


class Cat(Op, name="CatBackward0"):
    """out = the inputs joined along ``dim``.   dx_i = the slice of g that came from x_i."""

    def forward(self, *xs, dim):
        self.dim = dim
        # 1-d empty inputs are skipped (PyTorch's legacy rule) but stay inputs, with an empty gradient
        self.skipped = [x.shape == (0,) for x in xs] if any(x.shape != (0,) for x in xs) else [False] * len(xs)
        xs = [x for x, skip in zip(xs, self.skipped) if not skip]
        self.sizes = [x.shape[dim] for x in xs]
        try:
            return xp_of(xs[0]).concatenate(xs, axis=dim)
        except ValueError:
            shapes = ", ".join(str(list(x.shape)) for x in xs)
            raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}; got shapes {shapes}") from None

    def backward(self, g):
        lead = (slice(None),) * self.dim
        out, start = [], 0
        sizes = iter(self.sizes)
        for skip in self.skipped:
            if skip:
                out.append(g.reshape(-1)[:0])
                continue
            size = next(sizes)
            out.append(g[lead + (slice(start, start + size),)])
            start += size
        return tuple(out)


class Stack(Op, name="StackBackward0"):
    """out = the inputs stacked along a new ``dim``.   dx_i = g at position i of that dimension."""

    def forward(self, *xs, dim):
        self.dim = dim
        shapes = {x.shape for x in xs}
        if len(shapes) > 1:
            first = xs[0].shape
            i, other = next((i, x.shape) for i, x in enumerate(xs) if x.shape != first)
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 and {list(other)} "
                f"at entry {i}"
            )
        return xp_of(xs[0]).stack(xs, axis=dim)

    def backward(self, g):
        lead = (slice(None),) * self.dim
        return tuple(g[lead + (i,)] for i in range(g.shape[self.dim]))


class Unbind(Op, name="UnbindBackward0"):
    """outs = the slices of x along ``dim``.   dx = the grads of the slices stacked back along ``dim``."""

    multi_output = True

    def forward(self, x, dim):
        self.dim = dim
        lead = (slice(None),) * dim
        return tuple(x[lead + (i,)] for i in range(x.shape[dim]))

    def backward(self, *grads):
        return stack_grads(grads, self.dim)


class Split(Op, name="SplitBackward0"):
    """outs = consecutive pieces of x along ``dim`` of the given sizes.   dx = the pieces' grads joined back."""

    multi_output = True

    def forward(self, x, dim, sizes):
        self.dim = dim
        lead = (slice(None),) * dim
        starts = np.cumsum([0] + list(sizes[:-1]))
        return tuple(x[lead + (slice(int(s), int(s) + n),)] for s, n in zip(starts, sizes))

    def backward(self, *grads):
        return cat_grads(grads, self.dim)


class SplitWithSizes(Split, name="SplitWithSizesBackward0"):
    pass


def _check_list(tensors, fn: str) -> list:
    if isinstance(tensors, Tensor):
        raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    if not len(tensors):
        if fn == "cat":
            raise ValueError("torch.cat(): expected a non-empty list of Tensors")
        raise RuntimeError(f"{fn} expects a non-empty TensorList")
    return list(tensors)


def _promoted(tensors: list) -> list:
    """The tensors in their common dtype (PyTorch's promotion, as for a binary op)."""
    target = tensors[0]._data.dtype
    for t in tensors[1:]:
        if t._data.dtype != target:
            target = result_type(Tensor._make(xp_of(t._data).empty((1,), target))._data, t._data)
    return [t if t._data.dtype == target else t.to(dtype_of(target)) for t in tensors]


def _dim_alias(dim, axis, fn: str) -> int:
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{fn}() got multiple values for argument 'dim'")
        return axis
    return 0 if dim is None else dim


def cat(tensors, dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """Join tensors along an existing dimension (``axis`` is an alias of ``dim``). One-dimensional empty tensors
    are skipped, as PyTorch does for backward compatibility."""
    tensors = _promoted(_check_list(tensors, "cat"))
    dim = _dim_alias(dim, axis, "cat")
    for i, t in enumerate(tensors):
        if t._data.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    first = next((t for t in tensors if t._data.shape != (0,)), tensors[0])
    return Cat.apply(*tensors, dim=first._dim(dim))


concat = concatenate = cat


def stack(tensors, dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """Join same-shaped tensors along a new dimension (``axis`` is an alias of ``dim``), in their common dtype."""
    tensors = _promoted(_check_list(tensors, "stack"))
    dim = _dim_alias(dim, axis, "stack")
    n = tensors[0]._data.ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return Stack.apply(*tensors, dim=dim % n)


def hstack(tensors) -> Tensor:
    """Join tensors column-wise: along dimension 1, or along dimension 0 when they are 1-D (0-d tensors count as
    1-D ones of one element).

    >>> import trainkit
    >>> hstack([trainkit.ones(2), trainkit.zeros(1)])
    tensor([1., 1., 0.])
    """
    tensors = [t.reshape(1) if t._data.ndim == 0 else t for t in _check_list(tensors, "hstack")]
    return cat(tensors, 0 if tensors[0]._data.ndim == 1 else 1)


def vstack(tensors) -> Tensor:
    """Join tensors row-wise, along dimension 0, after making 0-d and 1-D tensors rows (1, n).

    >>> import trainkit
    >>> vstack([trainkit.ones(2), trainkit.zeros(2)])
    tensor([[1., 1.],
            [0., 0.]])
    """
    tensors = [t.reshape(1, -1) if t._data.ndim < 2 else t for t in _check_list(tensors, "vstack")]
    return cat(tensors, 0)


def unbind(input: Tensor, dim: int = 0) -> tuple:
    """The slices of ``input`` along ``dim``, as a tuple."""
    return Unbind.apply(input, dim=input._dim(dim))


def split(input: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Pieces of ``input`` along ``dim``: of equal size (the last may be smaller), or of the listed sizes."""
    if input._data.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = input._dim(dim)
    n = input._data.shape[d]
    cls = Split
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={step}")
        if step == 0 and n:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        sizes = [min(step, n - s) for s in range(0, n, step)] if n else [0]
    else:
        cls = SplitWithSizes
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension "
                f"{d}), but got split_sizes={sizes}"
            )
    return cls.apply(input, dim=d, sizes=tuple(sizes))


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """``chunks`` pieces of (nearly) equal size along ``dim``."""
    if input._data.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input._data.shape[input._dim(dim)]
    if n == 0:  # PyTorch gives ``chunks`` empty pieces here
        return SplitWithSizes.apply(input, dim=input._dim(dim), sizes=(0,) * chunks)
    return split(input, -(-n // chunks), dim)
