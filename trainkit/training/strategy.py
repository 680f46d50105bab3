"""Strategies: where the Trainer's loop runs, on one device (``Strategy``) or data-parallel over MPI (``DDPStrategy``).

The Trainer's loop is the same for both; it calls its strategy at these points, in this order (hooks of the base
class are no-ops or return their input, so a single process trains exactly as the loop reads)::

    Trainer(...)
        root_device(device) -> device          # before the model moves: the device this process trains on
        process_seed(seed) -> seed or None      # the seed this process's random stream starts from
        setup(trainer)                          # model and optimizer built: same weights everywhere, grad reducer
        select_callbacks(callbacks) -> list     # the callbacks this process runs
    make_loader(...)
        shard_loader(loader) -> loader          # this process's share of every batch
    fit(...)
        gather_rng_states()                     # at start and after each epoch: every rank's random stream
        for each batch:
            before_batch(loader, index, inputs) -> (size, global_size)
            scale_loss(loss, size, global_size) -> loss     # before backward
            after_backward(step_now)                        # before the on_after_backward callbacks
            reduce_batch_loss(value, size) -> (value, size) # before on_train_batch_end
            should_stop(stop_training) -> bool              # after on_train_batch_end
        reduce_metrics(metrics)                 # before the epoch's metrics are computed
        call_epoch_end(callbacks, epoch, logs)  # instead of callbacks.on_epoch_end
        is_main                                 # whether this process gets the callbacks that write files
        should_stop(stop_training) -> bool      # after the epoch
        on_exception(trainer, exc)              # when fit raises, after the on_exception callbacks
    evaluate(...)
        before_batch(loader, index, inputs, training=False) -> (size, global_size)
        reduce_sums(total, count) -> (total, count), reduce_metrics(metrics)

``rng_states()`` and ``set_rng_states(states)`` carry the per-rank random streams into and out of checkpoints.

Every hook that communicates is called at the same point on every rank (also on a rank whose share of a short
batch is empty), so the collectives line up.

>>> Strategy().name, Strategy().is_main, Strategy().world_size
('single_device', True, 1)
>>> resolve("single_device").scale_loss(2.0, 3, 3)
2.0
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import cuda
from ..autograd.backend import load_cupy
from ..autograd.random import default_generator
from ..autograd.tensor import Tensor
from ..data import DataLoader
from ..data.dataloader import default_collate
from ..distributed import (
    DistributedDataParallel,
    GradientReducer,
    ReduceOp,
    ShardedBatchSampler,
    World,
    broadcast_tensors,
    launched_size,
    world,
)
from .run_folder import RunFolder

if TYPE_CHECKING:
    from ..metrics import Metric
    from ..trainer import Trainer

STRATEGIES = ("auto", "ddp", "single_device")


class Strategy:
    """One process on one device: every hook does nothing or hands its input back.

    Subclass it to run the Trainer's loop elsewhere; ``Trainer(model, strategy=MyStrategy())`` takes an instance.
    """

    name = "single_device"
    world: World | None = None
    rank = 0
    world_size = 1

    @property
    def is_main(self) -> bool:
        """Whether this process prints, writes checkpoints and runs ``rank_zero_only`` callbacks."""
        return self.rank == 0

    def root_device(self, device: Any) -> Any:
        """The device this process trains on, given the one the Trainer was asked for."""
        return device

    def process_seed(self, seed: int | None) -> int | None:
        """The seed this process's random stream starts from, given ``Trainer(seed=...)`` (None: leave the
        stream as it is)."""
        return seed

    def setup(self, trainer: Trainer) -> None:
        """Prepare for ``trainer``, whose model (on its device), optimizer and seed are set."""

    def select_callbacks(self, callbacks: Sequence[Any]) -> list:
        """The callbacks this process runs."""
        return list(callbacks)

    def shard_loader(self, loader: Any) -> Any:
        """The loader of this process's share of every batch of ``loader``."""
        return loader

    def gather_rng_states(self) -> None:
        """Collect every rank's random stream for ``rng_states`` (fit calls it at start and after each epoch)."""

    def rng_states(self) -> list:
        """The random stream of every rank, for a checkpoint (this process's own here)."""
        return [default_generator.get_state()]

    def set_rng_states(self, states: list) -> None:
        """The streams a checkpoint of as many ranks held, loaded: ``rng_states`` returns them until the next
        gather."""

    def before_batch(self, loader: Any, index: int, inputs: Any, training: bool = True) -> tuple[int, int]:
        """(this process's, the whole batch's) sample counts of the batch just drawn."""
        size = len(inputs) if isinstance(inputs, Tensor) and inputs.ndim else 1
        return size, size

    def scale_loss(self, loss: Any, size: int, global_size: int) -> Any:
        """The loss to call ``backward`` on, for a share of ``size`` samples of a batch of ``global_size``."""
        return loss

    def after_backward(self, step_now: bool) -> None:
        """After each batch's backward (also where a rank had nothing to run it on); ``step_now``: the optimizer
        steps after this batch."""

    def reduce_batch_loss(self, value: float, size: int) -> tuple[float, int]:
        """The mean loss over the whole batch and its size."""
        return value, size

    def reduce_sums(self, total: float, count: int) -> tuple[float, int]:
        """An evaluation's summed loss and sample count, over all the data."""
        return total, count

    def reduce_metrics(self, metrics: Sequence[Metric]) -> None:
        """Make each metric's running totals cover all the data, so that ``compute()`` does."""

    def should_stop(self, stop_training: bool) -> bool:
        """Whether training stops, given this process's ``trainer.stop_training``."""
        return stop_training

    def call_epoch_end(self, callbacks: Any, epoch: int, logs: dict) -> None:
        """Run the callbacks' ``on_epoch_end`` on the epoch's logs."""
        callbacks.on_epoch_end(epoch, logs)

    def on_exception(self, trainer: Trainer, exc: BaseException) -> None:
        """``fit`` raised ``exc`` (it is raised again afterwards)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class DDPStrategy(Strategy):
    """Data-parallel training over the MPI world of ``trainkit.distributed`` (``strategy="ddp"``).

    Every rank starts from rank 0's weights (and buffers), trains on its share of every batch, and averages the
    gradients over the ranks before each optimizer step; losses and metrics are reduced over the ranks before
    anyone sees them; only rank 0 runs the ``rank_zero_only`` callbacks and writes. In a world of one process it
    trains as ``Strategy`` does.

    >>> ddp = DDPStrategy()
    >>> ddp.name, ddp.world_size, ddp.is_main
    ('ddp', 1, True)
    """

    name = "ddp"

    def __init__(self, bucket_cap_mb: float = 25.0, group: World | None = None) -> None:
        self.world = group if group is not None else world()
        self.rank, self.world_size = self.world.rank, self.world.size
        self.bucket_cap_mb = bucket_cap_mb
        self.reducer: GradientReducer | None = None
        self.model: Any = None
        self._rng_states: list | None = None  # rank 0's alone: gather_object gives the others None

    def root_device(self, device: Any) -> Any:
        if self.world_size == 1 or str(device) != "cuda":
            return device
        index = self.world.local_rank % max(cuda.device_count(), 1)  # one GPU per rank on each machine, in turn
        load_cupy().cuda.Device(index).use()  # NCCL and fresh buffers go to the current device
        return f"cuda:{index}"

    def process_seed(self, seed: int | None) -> int | None:
        """Every rank draws its own dropout masks: rank r starts from ``seed + r`` (the stream's initial seed when
        ``seed`` is None); rank 0 keeps the stream a single process would have."""
        if not self.rank:
            return seed
        return (default_generator.initial_seed() if seed is None else seed) + self.rank

    def setup(self, trainer: Trainer) -> None:
        self.model = trainer.model
        if self.world_size == 1:
            return
        if isinstance(self.model, DistributedDataParallel):
            # the Trainer calls the wrapper's collectives itself, at the same points on every rank (also on a rank
            # whose share of a short batch is empty and runs no forward or backward)
            self.model.manual_reduction = True
            self.reducer = self.model.reducer
        else:
            broadcast_tensors(list(self.model.parameters()) + self._buffers(), 0, self.world)
            self.reducer = GradientReducer(self.model.parameters(), self.bucket_cap_mb, self.world)

    def select_callbacks(self, callbacks: Sequence[Any]) -> list:
        return [cb for cb in callbacks if self.is_main or not getattr(cb, "rank_zero_only", False)]

    def shard_loader(self, loader: Any) -> Any:
        if self.world_size == 1 or isinstance(loader.batch_sampler, ShardedBatchSampler):
            return loader
        if loader.batch_sampler is None:
            raise ValueError("data-parallel training needs batches: give the DataLoader a batch_size")
        shards = DataLoader(
            loader.dataset,
            batch_sampler=ShardedBatchSampler(loader.batch_sampler, self.rank, self.world_size),
            collate_fn=None if loader.collate_fn is default_collate else loader.collate_fn,
            generator=loader.generator,  # each pass draws its seed from the loader's stream, as one process does
        )
        if not shards.slices_tensors:  # a share of a short batch may be empty: there is nothing to collate then
            collate = shards.collate_fn
            shards.collate_fn = lambda samples: collate(samples) if samples else None
        return shards

    # ------------------------------------------------------------------------------------------- random streams
    def gather_rng_states(self) -> None:
        if self.world_size > 1:
            self._rng_states = self.world.gather_object(default_generator.get_state())

    def rng_states(self) -> list:
        return self._rng_states or super().rng_states()

    def set_rng_states(self, states: list) -> None:
        if self.world_size > 1:  # a world of one reads its stream afresh, as a single device does
            self._rng_states = list(states)

    # ------------------------------------------------------------------------------------------------ batches
    def _buffers(self) -> list[Tensor]:
        return [b for b in self.model.buffers() if b is not None]

    def sync_buffers(self) -> None:
        """Give every rank rank 0's buffers (BatchNorm's running statistics) before a forward, as torch's DDP does:
        each rank's would otherwise drift with its own share of the data."""
        buffers = self._buffers()
        if buffers:
            broadcast_tensors(buffers, 0, self.world)

    def before_batch(self, loader: Any, index: int, inputs: Any, training: bool = True) -> tuple[int, int]:
        if self.world_size == 1:
            return super().before_batch(loader, index, inputs, training)
        if index == 0:
            self.check_same_batches(loader)
        if training or index == 0:  # evaluation changes no buffer: once is enough
            self.sync_buffers()
        return loader.batch_sampler.last_sizes

    def check_same_batches(self, loader: Any) -> None:
        """Fail at once if the ranks drew different global batches (each would then train on data of its own), or
        have different numbers of them (they would then wait for each other forever)."""
        first = loader.batch_sampler.first_batch or []
        mark = float(sum((i + 1) * (k + 1) for k, i in enumerate(first)))
        batches = float(len(loader))
        marks = self.world.allreduce(np.array([mark, -mark, batches, -batches]), ReduceOp.MAX)
        if marks[2] != -marks[3]:
            raise RuntimeError(
                "the ranks' loaders have different numbers of batches: every rank must load the same "
                "dataset (the Trainer gives each rank its share of every batch)"
            )
        if marks[0] != -marks[1]:
            raise RuntimeError(
                "the ranks drew different batches: give the DataLoader a generator seeded alike on "
                "every rank (trainkit.Generator().manual_seed(seed)), or pass a Dataset and let "
                "the Trainer make the loader"
            )

    def scale_loss(self, loss: Any, size: int, global_size: int) -> Any:
        if self.world_size > 1 and size * self.world_size != global_size:
            return loss * (size * self.world_size / global_size)  # unequal shares: weigh by share
        return loss

    def after_backward(self, step_now: bool) -> None:
        if step_now and self.reducer is not None:
            self.reducer.reduce()

    # ------------------------------------------------------------------------------------------------ reducing
    def reduce_batch_loss(self, value: float, size: int) -> tuple[float, int]:
        if self.world_size == 1:
            return value, size
        sums = self.world.allreduce(np.array([value * size, size], dtype=np.float64))
        return (float(sums[0] / sums[1]) if sums[1] else 0.0), int(sums[1])

    def reduce_sums(self, total: float, count: int) -> tuple[float, int]:
        if self.world_size == 1:
            return total, count
        sums = self.world.allreduce(np.array([total, count], np.float64))
        return float(sums[0]), int(sums[1])

    def reduce_metrics(self, metrics: Sequence[Metric]) -> None:
        """Sum every metric's running total and count over the ranks, so that ``compute()`` covers all data."""
        if self.world_size == 1 or not metrics:
            return
        sums = self.world.allreduce(np.array([v for m in metrics for v in (m.total, m.count)], np.float64))
        for i, m in enumerate(metrics):
            m.total, m.count = float(sums[2 * i]), int(sums[2 * i + 1])

    def should_stop(self, stop_training: bool) -> bool:
        """Whether any rank asked to stop; all ranks then stop together rather than leave others waiting."""
        if self.world_size == 1:
            return stop_training
        return bool(self.world.allreduce(np.array([stop_training], np.int32), ReduceOp.MAX)[0])

    def call_epoch_end(self, callbacks: Any, epoch: int, logs: dict) -> None:
        if self.world_size == 1:
            callbacks.on_epoch_end(epoch, logs)
        else:
            callbacks.on_epoch_end_in_world(epoch, logs, self.world)

    def on_exception(self, trainer: Trainer, exc: BaseException) -> None:
        if self.world_size == 1:
            return
        # the other ranks may be waiting in a collective for this one: end them all rather than hang
        if isinstance(exc, KeyboardInterrupt):
            if self.is_main and trainer.run_dir is not None:
                trainer.save_checkpoint(RunFolder(trainer.run_dir).interrupted)
            self.world.abort("interrupted", getattr(exc, "exit_code", 130))  # 143 after SIGTERM
        self.world.abort(
            f"training failed with {type(exc).__name__}: {exc}",
            detail=traceback.format_exc() if self.world.show_traceback else "",
        )

    def __repr__(self) -> str:
        return f"DDPStrategy(rank={self.rank}, world_size={self.world_size})"


def resolve(strategy: str | Strategy = "auto", bucket_cap_mb: float = 25.0) -> Strategy:
    """The strategy a Trainer runs: an instance as it is; ``"auto"`` is ``"ddp"`` when an MPI launcher started
    several processes and ``"single_device"`` otherwise.

    >>> resolve("auto")
    Strategy()
    >>> resolve("dp")
    Traceback (most recent call last):
    ...
    ValueError: strategy must be 'auto', 'ddp' or 'single_device', got 'dp'
    """
    if isinstance(strategy, Strategy):
        return strategy
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be 'auto', 'ddp' or 'single_device', got {strategy!r}")
    if strategy == "auto":
        strategy = "ddp" if launched_size() > 1 else "single_device"
    return DDPStrategy(bucket_cap_mb) if strategy == "ddp" else Strategy()


__all__ = ["DDPStrategy", "STRATEGIES", "Strategy", "resolve"]
