"""Map-style datasets, as ``torch.utils.data``: samples looked up by index, joined, subset and split."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..autograd.backend import float32
from ..autograd.creation import randperm
from ..autograd.random import Generator
from ..autograd.tensor import Tensor
from ..autograd.user_warnings import warn_user


class Dataset:
    """A collection of samples looked up by index: subclasses define ``__getitem__`` and ``__len__``.

    >>> class Squares(Dataset):
    ...     def __getitem__(self, i): return i * i
    ...     def __len__(self): return 4
    >>> [Squares()[i] for i in range(4)], len(Squares() + Squares())
    ([0, 1, 4, 9], 8)
    """

    def __getitem__(self, index) -> Any:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __len__(self) -> int:
        raise NotImplementedError("Subclasses of Dataset should implement __len__.")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the rows of tensors that share their first dimension: ``dataset[i] == (x[i], y[i])``.

    >>> import trainkit
    >>> ds = TensorDataset(trainkit.arange(6).reshape(3, 2), trainkit.tensor([0, 1, 0]))
    >>> len(ds), ds[1]
    (3, (tensor([2, 3]), tensor(1)))
    """

    def __init__(self, *tensors: Tensor):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        sizes = [t.size(0) for t in tensors]
        if any(s != sizes[0] for s in sizes):
            # AssertionError as torch raises, with the sizes so the culprit is easy to spot
            raise AssertionError(f"Size mismatch between tensors: first dimensions {sizes}")
        self.tensors = tensors

    def __getitem__(self, index) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


def as_tensor(value: Any, float_dtype: Any = float32) -> Tensor:
    """``value`` as a Tensor for training, as Keras takes NumPy data: a Tensor stays as it is; floating arrays (and
    lists of floats: NumPy makes them float64) take ``float_dtype`` (the model's), integer arrays become int64 (the
    class indices losses expect); others keep their dtype.

    >>> import numpy as np
    >>> as_tensor(np.zeros(2)).dtype, as_tensor(np.array([1, 2], np.int32)).dtype
    (trainkit.float32, trainkit.int64)
    """
    if isinstance(value, Tensor):
        return value
    array = np.asarray(value)
    if array.dtype.kind == "f":
        array = array.astype(float_dtype.np, copy=False)
    elif array.dtype.kind in "iu" and array.dtype != np.uint8:  # uint8 stays: images, and torch's Byte targets
        array = array.astype(np.int64, copy=False)
    return Tensor._make(np.ascontiguousarray(array))


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order.

    >>> Subset(range(10), [7, 2])[1]
    2
    """

    def __init__(self, dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after another.

    >>> ds = ConcatDataset([range(3), range(10, 12)])
    >>> len(ds), ds[3], ds[-1]
    (5, 10, 11)
    """

    def __init__(self, datasets: Iterable):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


def _lengths_from_fractions(lengths: Sequence[float], n: int) -> list[int]:
    """floor(fraction * n) each, then the remainder handed out one by one from the first split (as torch)."""
    sizes = []
    for i, frac in enumerate(lengths):
        if frac < 0 or frac > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        sizes.append(math.floor(n * frac))
    for i in range(n - sum(sizes)):
        sizes[i % len(sizes)] += 1
    for i, size in enumerate(sizes):
        if size == 0:
            warn_user(f"Length of split at index {i} is 0. This might result in an empty dataset.")
    return sizes


def random_split(dataset, lengths: Sequence[int | float], generator: Generator | None = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets of the given lengths, or fractions summing to 1.

    The permutation comes from ``generator``, else from the global stream (``trainkit.manual_seed``).

    >>> import trainkit
    >>> train, val = random_split(range(10), [0.75, 0.25], generator=trainkit.Generator().manual_seed(0))
    >>> len(train), len(val)
    (8, 2)
    """
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _lengths_from_fractions(lengths, len(dataset))
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator).tolist()
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, indices[end - length : end]) for end, length in zip(ends, lengths)]


def split_tail(dataset, fraction: float) -> tuple[Subset, Subset]:
    """``(head, tail)``: the last ``int(len(dataset) * fraction)`` samples held out, in order, as Keras'
    ``validation_split`` holds out its share (no shuffling, so the split is the same on every run and resume).

    >>> head, tail = split_tail(list(range(10)), 0.25)
    >>> list(head.indices), list(tail.indices)
    ([0, 1, 2, 3, 4, 5, 6, 7], [8, 9])
    """
    n = len(dataset)
    cut = n - int(n * fraction)
    return Subset(dataset, range(cut)), Subset(dataset, range(cut, n))
