"""Batches from a dataset, as ``torch.utils.data.DataLoader``: samplers pick indices, a collate function stacks."""

from __future__ import annotations

import collections.abc
import itertools
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any

import numpy as np

from ..autograd.backend import float64, int64
from ..autograd.creation import as_tensor, empty, randint, randperm, tensor
from ..autograd.ops.sampling import multinomial
from ..autograd.ops.shape import stack
from ..autograd.random import Generator
from ..autograd.tensor import Tensor
from .dataset import Subset, TensorDataset

# RandomSampler(replacement=True) draws its indices in chunks of this many, as PyTorch does
REPLACEMENT_CHUNK = 32

_COLLATE_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


class Sampler:
    """Something that yields dataset indices; subclasses define ``__iter__`` (and usually ``__len__``)."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Indices 0, 1, ..., len(data_source) - 1.

    >>> list(SequentialSampler(range(3)))
    [0, 1, 2]
    """

    def __init__(self, data_source: Sized):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in random order (a new order each ``iter()``), or drawn with replacement.

    Without ``generator``, each pass seeds a fresh stream from the global one, so ``trainkit.manual_seed``
    makes the orders repeat.

    >>> import trainkit
    >>> sorted(RandomSampler(range(4), generator=trainkit.Generator().manual_seed(0)))
    [0, 1, 2, 3]
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Generator | None = None,
    ):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        # read each time: the dataset may grow or shrink between epochs
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            # as PyTorch: one int64 draw from the global stream per pass seeds this pass's own generator
            generator = Generator().manual_seed(int(empty((), dtype=int64).random_().item()))
        if self.replacement:
            # drawn 32 at a time, as PyTorch draws them: the same indices for the same seed, and a huge
            # num_samples (minGPT asks for 1e10 to sample forever) costs nothing until it is iterated
            for _ in range(self.num_samples // REPLACEMENT_CHUNK):
                yield from randint(0, n, (REPLACEMENT_CHUNK,), generator=generator).tolist()
            yield from randint(0, n, (self.num_samples % REPLACEMENT_CHUNK,), generator=generator).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=generator).tolist()
        yield from randperm(n, generator=generator).tolist()[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, a new one each pass (``randperm`` of their count, as PyTorch).

    >>> import trainkit
    >>> sorted(SubsetRandomSampler([4, 7, 9], generator=trainkit.Generator().manual_seed(0)))
    [4, 7, 9]
    """

    def __init__(self, indices, generator: Generator | None = None):
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights`` (``multinomial`` of the
    float64 weights, as PyTorch), with replacement unless told otherwise.

    >>> import trainkit
    >>> list(WeightedRandomSampler([0.0, 1.0, 0.0], 3, generator=trainkit.Generator().manual_seed(0)))
    [1, 1, 1]
    """

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator: Generator | None = None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        self.weights = as_tensor(weights, dtype=float64)
        if self.weights.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape {tuple(self.weights.shape)}"
            )
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        yield from multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of ``batch_size``; the short last one is dropped on request.

    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        indices = iter(self.sampler)
        while batch := list(itertools.islice(indices, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


def default_collate(batch: list) -> Any:
    """Stack a list of samples into one batch, keeping the samples' structure (as torch's ``default_collate``).

    Tensors and arrays are stacked along a new first dimension, Python floats become float64 and ints int64
    tensors, strings stay a list; dicts collate key by key, and tuples or lists position by position (into a list).

    >>> b = default_collate([(1.0, {"id": 3}), (2.0, {"id": 4})])
    >>> b[0].dtype, b[1]["id"]
    (trainkit.float64, tensor([3, 4]))
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "SUaO":
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return as_tensor(np.stack(batch))
    if isinstance(elem, (np.bool_, np.number)):
        return as_tensor(np.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype="float64")
    if isinstance(elem, int):  # bools too: they collate to a bool tensor
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        out = {key: default_collate([d[key] for d in batch]) for key in elem}
        return out if type(elem) is dict else _rebuild(type(elem), out)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple keeps its type
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        # tuples come back as lists, as in torch
        return [default_collate(list(samples)) for samples in zip(*batch)]
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


def _rebuild(mapping_type: type, items: dict):
    try:
        return mapping_type(items)
    except TypeError:  # a mapping type that cannot be built from a dict: a plain dict will do
        return items


def _tensors_behind(dataset) -> tuple[tuple[Tensor, ...], Any] | None:
    """The tensors of a TensorDataset (possibly inside Subsets) and how to map indices into them, else None."""
    # subclasses that change __getitem__ may transform samples: only the plain lookups can be bypassed
    chain = []
    while isinstance(dataset, Subset) and type(dataset).__getitem__ is Subset.__getitem__:
        chain.append(dataset.indices)
        dataset = dataset.dataset
    if not isinstance(dataset, TensorDataset) or type(dataset).__getitem__ is not TensorDataset.__getitem__:
        return None

    def to_rows(indices: list[int]) -> np.ndarray:
        rows = np.asarray(indices, dtype=np.int64)
        for subset_indices in chain:
            rows = np.asarray(subset_indices, dtype=np.int64)[rows]
        return rows

    return dataset.tensors, to_rows


class DataLoader:
    """Iterate over ``dataset`` in batches; with ``shuffle=True`` the order is new on every pass.

    Batches of a ``TensorDataset`` (also behind ``random_split``'s subsets) are cut from the whole tensors with
    one index array, rather than stacked sample by sample. ``batch_sampler`` replaces batch_size, shuffle, sampler
    and drop_last with a source of index lists. ``num_workers``, ``pin_memory`` and the other worker options are
    accepted (and checked as torch checks them) so that torch code ports unchanged, but batches are always loaded
    in the calling process.

    >>> import trainkit
    >>> ds = TensorDataset(trainkit.arange(5.0).unsqueeze(1), trainkit.arange(5))
    >>> loader = DataLoader(ds, batch_size=2)
    >>> len(loader), [y.tolist() for _, y in loader]
    (3, [[0, 1], [2, 3], [4]])
    """

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Iterable[int] | None = None,
        batch_sampler: Iterable[list[int]] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable | None = None,
        multiprocessing_context=None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ):
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                "to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers == 0 and persistent_workers:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.generator = generator
        self.sampler = sampler
        # Samples are loaded in this process whatever num_workers says: NumPy slicing of in-memory data is faster
        # than shipping batches between processes. The options are kept so that torch code ports unchanged.
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        self.collate_fn = collate_fn if collate_fn is not None else default_collate
        self._fast = _tensors_behind(dataset) if collate_fn is None else None

    @property
    def slices_tensors(self) -> bool:
        """Whether each batch is sliced at once out of the tensors behind the dataset (a ``TensorDataset``, or a
        ``Subset`` of one, with the default ``collate_fn``); ``collate_fn`` is then never called.

        >>> import trainkit
        >>> data = trainkit.data.TensorDataset(trainkit.zeros(4, 1))
        >>> DataLoader(data, batch_size=2).slices_tensors, DataLoader(data, collate_fn=list).slices_tensors
        (True, False)
        """
        return self._fast is not None

    def __iter__(self) -> Iterator:
        # PyTorch draws the base seed of its worker processes as each pass starts, with or without workers: one
        # int64 from the loader's generator (the global stream without one), before the sampler's own draw
        empty((), dtype=int64).random_(generator=self.generator)
        return self._batches()

    def _batches(self) -> Iterator:
        if self.batch_sampler is None:
            # no batching: samples one by one, through collate_fn only when one was given
            for i in self.sampler:
                sample = self.dataset[i]
                yield sample if self.collate_fn is default_collate else self.collate_fn(sample)
            return
        for indices in self.batch_sampler:
            if self._fast is not None:
                tensors, to_rows = self._fast
                rows = to_rows(indices)
                yield [t[rows] for t in tensors]
            else:
                yield self.collate_fn([self.dataset[i] for i in indices])

    def __len__(self) -> int:
        return len(self.sampler if self.batch_sampler is None else self.batch_sampler)
