"""Each rank's share of every global batch: the batches are drawn alike on all ranks, then cut by rank."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


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
