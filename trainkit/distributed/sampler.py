"""Each rank's share of the data: ``ShardedBatchSampler`` cuts every global batch by rank (the Trainer's way),
``DistributedSampler`` gives each rank every N-th index of one shared order (torch's way)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sized

from ..autograd.creation import randperm
from ..autograd.random import Generator
from ..data.dataloader import Sampler
from .process_group import default_group


def shard_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """Where rank ``rank``'s contiguous share of ``n`` items starts and stops; the first ``n % world_size`` ranks
    get one more (as ``numpy.array_split``).

    >>> [shard_bounds(5, r, 2) for r in range(2)]
    [(0, 3), (3, 5)]
    """
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


class ShardedBatchSampler:
    """Yields this rank's slice of each batch of ``batch_sampler``, which must draw the same batches on every rank
    (a sequential order, or a shuffle from a generator seeded alike). ``last_sizes`` holds (this rank's, the whole
    batch's) sample counts of the batch last yielded.

    >>> from trainkit.data import BatchSampler, SequentialSampler
    >>> batches = BatchSampler(SequentialSampler(range(7)), batch_size=4, drop_last=False)
    >>> list(ShardedBatchSampler(batches, rank=1, world_size=2))
    [[2, 3], [6]]
    """

    def __init__(self, batch_sampler: Iterable[list[int]], rank: int, world_size: int):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
        self.batch_sampler = batch_sampler
        self.rank = rank
        self.world_size = world_size
        self.last_sizes = (0, 0)
        self.first_batch: list[int] | None = None  # of the latest pass: ranks compare it to catch unlike orders

    def __iter__(self) -> Iterator[list[int]]:
        first = True
        for batch in self.batch_sampler:
            batch = list(batch)
            if first:
                self.first_batch, first = batch, False
            start, stop = shard_bounds(len(batch), self.rank, self.world_size)
            self.last_sizes = (stop - start, len(batch))
            yield batch[start:stop]

    def __len__(self) -> int:
        return len(self.batch_sampler)


class DistributedSampler(Sampler):
    """This rank's share of a dataset's indices, as ``torch.utils.data.distributed.DistributedSampler``.

    Every rank draws the same order (a shuffle seeded with ``seed + epoch``: call ``set_epoch(epoch)`` before each
    epoch for a new one), pads it by repeating its start until every rank gets as many indices (or, with
    ``drop_last``, cuts the tail that would not divide evenly), and takes every ``num_replicas``-th index from
    position ``rank``. The indices are torch's, bit for bit.

    >>> sampler = DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False)
    >>> list(sampler), len(sampler)
    ([1, 3, 0], 3)
    >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False, drop_last=True))
    [1, 3]
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        if num_replicas is None:
            num_replicas = default_group().size()
        if rank is None:
            rank = default_group().rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)  # the tail no rank could share is cut
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            generator = Generator()
            generator.manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=generator).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[: self.total_size]
        elif self.total_size > n and n > 0:
            repeats = math.ceil((self.total_size - n) / n)
            indices += (indices * repeats)[: self.total_size - n]
        assert len(indices) == self.total_size
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the next shuffle's seed, so that each epoch has its own order (the same on every rank).

        >>> s = DistributedSampler(range(8), num_replicas=2, rank=0, seed=0)
        >>> s.set_epoch(1); s.epoch
        1
        """
        self.epoch = epoch
