"""Trainer: Keras-like ``fit`` / ``evaluate`` / ``predict`` for a Module, with callbacks, checkpoints and resume.

One optimizer step is: forward, loss, ``backward`` (scaled by ``1 / accumulate_steps``), the ``on_after_backward``
hooks, clipping, ``on_before_optimizer_step``, ``optimizer.step()``, ``zero_grad``. Evaluation and prediction run
under ``no_grad`` with the model in eval mode, and put it back as it was.

With ``strategy="ddp"`` (the default ``"auto"`` picks it when an MPI launcher started several processes), each
rank starts from rank 0's weights, trains on its share of every batch, and averages the gradients over the ranks
before each step (``trainkit.distributed``); losses and metrics are reduced over the ranks before anyone sees them,
and only rank 0 prints, writes checkpoints and runs the ``rank_zero_only`` callbacks.
"""

from __future__ import annotations

import copy
import math
import traceback
from pathlib import Path

import numpy as np

from . import checkpoint as ckpt
from .autograd import grad_mode
from .autograd.random import Generator, default_generator, manual_seed
from .autograd.tensor import Tensor
from .callbacks.history import History
from .distributed import (
    DistributedDataParallel,
    GradientReducer,
    ReduceOp,
    ShardedBatchSampler,
    broadcast_tensors,
    launched_size,
    world,
)
from .layers import loss as losses
from .layers.clip_grad import clip_grad_norm_
from .layers.module import Module
from .metrics import Metric, get_metric

_LOSSES = {
    "mse": losses.MSELoss, "l1": losses.L1Loss, "mae": losses.L1Loss, "huber": losses.HuberLoss,
    "smooth_l1": losses.SmoothL1Loss, "cross_entropy": losses.CrossEntropyLoss, "nll": losses.NLLLoss,
    "bce": losses.BCELoss, "bce_with_logits": losses.BCEWithLogitsLoss,
}


def _loss_fn(loss):
    if isinstance(loss, str):
        if loss not in _LOSSES:
            raise ValueError(f"unknown loss {loss!r}: use one of {', '.join(sorted(_LOSSES))}, or a loss module")
        return _LOSSES[loss]()
    if loss is None or not callable(loss):
        raise TypeError(f"loss must be a loss module, a callable or a name, got {type(loss).__name__}")
    return loss


class Trainer:
    """Train ``model`` with ``optimizer`` on ``loss``; report ``metrics``; call ``callbacks`` at each stage.

    >>> import trainkit
    >>> from trainkit import nn, optim
    >>> trainkit.manual_seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> model = nn.Sequential(nn.Linear(1, 10), nn.ReLU(), nn.Linear(10, 1))
    >>> trainer = Trainer(model, optim.SGD(model.parameters(), lr=0.2), nn.MSELoss(), metrics=["mae"],
    ...                   seed=0, verbose=False)
    >>> x = trainkit.linspace(-1, 1, 100).unsqueeze(1)
    >>> history = trainer.fit(x, x ** 2, epochs=3, batch_size=20)
    >>> sorted(history.history)
    ['loss', 'lr', 'mae']
    """

    def __init__(self, model: Module, optimizer=None, loss="mse", metrics=(), callbacks=(), *, device="cpu",
                 seed: int | None = None, scheduler=None, grad_clip_norm: float | None = None,
                 accumulate_steps: int = 1, freeze=(), run_dir: str | Path | None = None, verbose: bool = True,
                 strategy: str = "auto", bucket_cap_mb: float = 25.0):
        if accumulate_steps < 1:
            raise ValueError(f"accumulate_steps must be at least 1, got {accumulate_steps}")
        if strategy not in ("auto", "ddp", "single_device"):
            raise ValueError(f"strategy must be 'auto', 'ddp' or 'single_device', got {strategy!r}")
        if strategy == "auto":
            strategy = "ddp" if launched_size() > 1 else "single_device"
        self.strategy = strategy
        self.world = world() if strategy == "ddp" else None
        self.rank = self.world.rank if self.world is not None else 0
        self.world_size = self.world.size if self.world is not None else 1
        if self.world_size > 1 and str(device) == "cuda":  # one GPU per rank on each machine, in turn
            from . import cuda

            index = self.world.local_rank % max(cuda.device_count(), 1)
            device = f"cuda:{index}"
            from .autograd.backend import _load_cupy

            _load_cupy().cuda.Device(index).use()  # NCCL and fresh buffers go to the current device
        if seed is not None:
            manual_seed(seed)
        self.seed = seed
        self.device = device
        self.model = model.to(device)
        for name in freeze:
            try:
                self.model.get_submodule(name).requires_grad_(False)
            except AttributeError:
                names = [n for n, _ in self.model.named_modules() if n]
                raise ValueError(f"freeze: the model has no sub-module {name!r} (it has {names})") from None
        if optimizer is None:
            from .optim import SGD

            optimizer = SGD(self.model.parameters(), lr=0.01)
        self.optimizer = optimizer
        self.loss_fn = _loss_fn(loss)
        self.metrics: list[Metric] = [get_metric(m) for m in metrics]
        self.scheduler = scheduler
        self.grad_clip_norm = grad_clip_norm
        self.accumulate_steps = accumulate_steps
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.verbose = verbose and self.rank == 0
        self.stop_training = False
        self.epoch = 0
        self.global_step = 0
        self.history: dict[str, list] = {}
        self.epochs = 0
        self._epoch_logs: dict | None = None
        self.loader_generator = Generator().manual_seed(0 if seed is None else seed)
        self.reducer = None
        self._rank_rng_states: list | None = None
        if self.world_size > 1:
            if isinstance(self.model, DistributedDataParallel):
                # the Trainer calls the wrapper's collectives itself, at the same points on every rank (also on a
                # rank whose share of a short batch is empty and runs no forward or backward)
                self.model._manual = True
                self.reducer = self.model._reducer
            else:
                broadcast_tensors(list(self.model.parameters()) + self._buffers())
                self.reducer = GradientReducer(self.model.parameters(), bucket_cap_mb, self.world)
            # every rank draws its own dropout masks; rank 0 keeps the stream a single process would have
            if self.rank:
                manual_seed((default_generator.initial_seed() if seed is None else seed) + self.rank)
        from .callbacks.base import CallbackList

        if self.rank:
            callbacks = [cb for cb in callbacks if not getattr(cb, "rank_zero_only", False)]
        self.callbacks = CallbackList(list(callbacks))
        self.callbacks.set_trainer(self)

    # ----------------------------------------------------------------------------------------------------- data
    def _loader(self, data, y, batch_size: int, shuffle: bool, shard: bool = True):
        """A loader from a DataLoader (as is), a Dataset, or tensors/arrays ``x`` (and ``y``); in data-parallel
        training (and with ``shard``), one that yields this rank's share of each of its batches."""
        from .data import DataLoader, Dataset, TensorDataset

        if isinstance(data, DataLoader):
            loader = data
        elif isinstance(data, Dataset):
            loader = DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=self.loader_generator)
        elif data is None:
            raise ValueError("no data: pass a DataLoader, a Dataset, or x and y")
        else:
            tensors = [t if isinstance(t, Tensor) else Tensor._make(np.asarray(t)) for t in (data, y)
                       if t is not None]
            loader = DataLoader(TensorDataset(*tensors), batch_size=batch_size, shuffle=shuffle,
                                generator=self.loader_generator)
        if not shard or self.world_size == 1 or isinstance(loader.batch_sampler, ShardedBatchSampler):
            return loader
        if loader.batch_sampler is None:
            raise ValueError("data-parallel training needs batches: give the DataLoader a batch_size")
        from .data.dataloader import default_collate

        shards = DataLoader(loader.dataset, batch_sampler=ShardedBatchSampler(loader.batch_sampler, self.rank,
                                                                              self.world_size),
                            collate_fn=None if loader.collate_fn is default_collate else loader.collate_fn)
        if shards._fast is None:  # a share of a short batch may be empty: there is nothing to collate then
            collate = shards.collate_fn
            shards.collate_fn = lambda samples: collate(samples) if samples else None
        return shards

    def _batch(self, batch):
        """(inputs, target) on the trainer's device; a batch without a target gives target None."""
        if isinstance(batch, (tuple, list)):
            x, y = (batch[0], batch[1]) if len(batch) > 1 else (batch[0], None)
        else:
            x, y = batch, None
        x = x.to(self.device) if isinstance(x, Tensor) else x
        y = y.to(self.device) if isinstance(y, Tensor) else y
        return x, y

    # ---------------------------------------------------------------------------------------------------- fit
    def fit(self, x=None, y=None, *, val_data=None, epochs: int = 1, batch_size: int = 32, shuffle: bool = True,
            validation_split: float = 0.0, resume_from: str | Path | None = None) -> History:
        """Train for ``epochs`` epochs (counting those done before a resume); returns a ``History`` whose
        ``.history`` maps each log key ('loss', 'val_loss', metrics, 'lr', monitor figures) to one value per
        epoch."""
        from .data import DataLoader, Dataset, Subset, TensorDataset

        if validation_split:
            if val_data is not None or isinstance(x, DataLoader):
                raise ValueError("validation_split needs x and y (or a Dataset) and no val_data")
            dataset = x if isinstance(x, Dataset) else TensorDataset(*(
                t if isinstance(t, Tensor) else Tensor._make(np.asarray(t)) for t in (x, y)))
            n_val = int(len(dataset) * validation_split)
            n = len(dataset) - n_val  # the last share validates, as in Keras
            x, y = Subset(dataset, range(n)), None
            val_data = Subset(dataset, range(n, len(dataset)))
        train_loader = self._loader(x, y, batch_size, shuffle)
        val_loader = None if val_data is None else self._loader(
            val_data[0] if isinstance(val_data, tuple) else val_data,
            val_data[1] if isinstance(val_data, tuple) else None, batch_size, False)
        first_epoch = 0
        if resume_from is not None:
            first_epoch = self.load_checkpoint(resume_from, resume=True) + 1
        if self.world_size > 1 and self._rank_rng_states is None:
            self._rank_rng_states = self.world.gather_object(default_generator.get_state())
        self.stop_training = False
        self.epochs = epochs
        self._report_parameters()
        logs: dict = {}
        try:
            self.callbacks.on_train_begin(logs)
            for epoch in range(first_epoch, epochs):
                self.epoch = epoch
                logs = self._train_epoch(train_loader, epoch)
                if val_loader is not None:
                    val_logs = {f"val_{k}": v for k, v in self.evaluate(val_loader).items()}
                    self.callbacks.on_validation_end(val_logs)
                    logs.update(val_logs)
                logs["lr"] = self.optimizer.param_groups[0]["lr"]
                self._step_scheduler(logs)
                if self.world_size > 1:  # every rank's random stream, for a resume that repeats this run
                    self._rank_rng_states = self.world.gather_object(default_generator.get_state())
                self._epoch_logs = logs  # checkpoints written by callbacks now must include this epoch
                if self.world_size > 1:
                    self.callbacks.on_epoch_end_in_world(epoch, logs, self.world)
                else:
                    self.callbacks.on_epoch_end(epoch, logs)
                self._epoch_logs = None
                _append(self.history, logs)
                if self.run_dir is not None and self.rank == 0 and math.isfinite(logs["loss"]):
                    # the resume point; after a non-finite epoch the last good one stays
                    self.save_checkpoint(self.run_dir / "checkpoints" / "last.npz")
                if self._agree_to_stop():
                    break
            self.callbacks.on_train_end(logs)
        except BaseException as exc:
            self.callbacks.on_exception(exc)
            if self.world_size > 1:
                # the other ranks may be waiting in a collective for this one: end them all rather than hang
                if isinstance(exc, KeyboardInterrupt):
                    if self.rank == 0 and self.run_dir is not None:
                        self.save_checkpoint(self.run_dir / "checkpoints" / "interrupted.npz")
                    self.world.abort("interrupted", 130)
                self.world.abort(f"training failed with {type(exc).__name__}: {exc}",
                                 detail=traceback.format_exc() if self.world.show_traceback else "")
            raise
        result = History()
        result.history = self.history
        return result

    def _report_parameters(self) -> None:
        params = list(self.model.parameters())
        trainable = sum(p.numel() for p in params if p.requires_grad)
        frozen = sum(p.numel() for p in params if not p.requires_grad)
        self.parameter_counts = {"trainable": trainable, "frozen": frozen}
        if self.verbose:
            print(f"Trainable params: {trainable:,} | Frozen params: {frozen:,}")

    def _train_epoch(self, loader, epoch: int) -> dict:
        self.model.train()
        self.callbacks.on_epoch_begin(epoch, {})
        for m in self.metrics:
            m.reset()
        total, count = 0.0, 0
        n_batches = len(loader) if hasattr(loader, "__len__") else None
        sharded = self.world_size > 1
        self.optimizer.zero_grad()
        for index, batch in enumerate(loader):
            x, y = self._batch(batch)
            size = len(x) if isinstance(x, Tensor) and x.ndim else 1
            if sharded:
                if index == 0:
                    self._check_same_batches(loader)
                size, global_size = loader.batch_sampler.last_sizes
                self._sync_buffers()
            self.callbacks.on_train_batch_begin(index, {})
            value = 0.0
            if size:  # a rank whose share of a short last batch is empty adds nothing but still takes the step
                output = self.model(x)
                loss = self.loss_fn(output, y)
                scaled = loss / self.accumulate_steps if self.accumulate_steps > 1 else loss
                if sharded and size * self.world_size != global_size:
                    scaled = scaled * (size * self.world_size / global_size)  # unequal shares: weigh by share
                scaled.backward()
                value = loss.item()
            last = n_batches is not None and index + 1 == n_batches
            step_now = (index + 1) % self.accumulate_steps == 0 or last
            if step_now and self.reducer is not None:
                self.reducer.reduce()
            self.callbacks.on_after_backward()
            if step_now:
                if self.grad_clip_norm is not None:
                    clip_grad_norm_([p for p in self.model.parameters() if p.grad is not None], self.grad_clip_norm)
                self.callbacks.on_before_optimizer_step(self.optimizer)
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.global_step += 1
            if size:
                for m in self.metrics:
                    m.update(output, y)
            value, size = self._batch_loss(value, size)
            total += value * size
            count += size
            self.callbacks.on_train_batch_end(index, {"loss": value, "step": self.global_step})
            if self._agree_to_stop():
                break
        self._reduce_metrics(self.metrics)
        logs = {"loss": total / count if count else math.nan}
        logs.update({m.name: m.compute() for m in self.metrics})
        return logs

    # -------------------------------------------------------------------------------------- data-parallel
    def _buffers(self) -> list[Tensor]:
        return [b for b in self.model.buffers() if b is not None]

    def _sync_buffers(self) -> None:
        """Give every rank rank 0's buffers (BatchNorm's running statistics) before a forward, as torch's DDP does:
        each rank's would otherwise drift with its own share of the data."""
        buffers = self._buffers()
        if buffers:
            broadcast_tensors(buffers, 0, self.world)

    def _batch_loss(self, value: float, size: int) -> tuple[float, int]:
        """The mean loss over the whole batch and its size (this rank's own without data parallelism)."""
        if self.world_size == 1:
            return value, size
        sums = self.world.allreduce(np.array([value * size, size], dtype=np.float64))
        return (float(sums[0] / sums[1]) if sums[1] else 0.0), int(sums[1])

    def _agree_to_stop(self) -> bool:
        """Whether any rank asked to stop; all ranks then stop together rather than leave others waiting."""
        if self.world_size > 1:
            self.stop_training = bool(self.world.allreduce(np.array([self.stop_training], np.int32),
                                                           ReduceOp.MAX)[0])
        return self.stop_training

    def _reduce_metrics(self, metrics: list[Metric]) -> None:
        """Sum every metric's running total and count over the ranks, so that ``compute()`` covers all data."""
        if self.world_size == 1 or not metrics:
            return
        sums = self.world.allreduce(np.array([v for m in metrics for v in (m.total, m.count)], np.float64))
        for i, m in enumerate(metrics):
            m.total, m.count = float(sums[2 * i]), int(sums[2 * i + 1])

    def _check_same_batches(self, loader) -> None:
        """Fail at once if the ranks drew different global batches (each would then train on data of its own), or
        have different numbers of them (they would then wait for each other forever)."""
        first = loader.batch_sampler.first_batch or []
        mark = float(sum((i + 1) * (k + 1) for k, i in enumerate(first)))
        batches = float(len(loader))
        marks = self.world.allreduce(np.array([mark, -mark, batches, -batches]), ReduceOp.MAX)
        if marks[2] != -marks[3]:
            raise RuntimeError("the ranks' loaders have different numbers of batches: every rank must load the same "
                               "dataset (the Trainer gives each rank its share of every batch)")
        if marks[0] != -marks[1]:
            raise RuntimeError("the ranks drew different batches: give the DataLoader a generator seeded alike on "
                               "every rank (trainkit.Generator().manual_seed(seed)), or pass a Dataset and let "
                               "the Trainer make the loader")

    def _step_scheduler(self, logs: dict) -> None:
        if self.scheduler is None:
            return
        from .optim.lr_scheduler import ReduceLROnPlateau

        if isinstance(self.scheduler, ReduceLROnPlateau):
            self.scheduler.step(logs.get("val_loss", logs["loss"]))
        else:
            self.scheduler.step()

    # ------------------------------------------------------------------------------------- evaluate / predict
    def evaluate(self, x=None, y=None, *, batch_size: int = 32) -> dict:
        """The loss and metrics over ``x`` (a loader, a dataset, or tensors with ``y``), without building graphs."""
        loader = self._loader(x, y, batch_size, False)
        metrics = [_fresh(m) for m in self.metrics]
        total, count = 0.0, 0
        was_training = [(m, m.training) for m in self.model.modules()]
        self.model.eval()
        try:
            if self.world_size > 1:
                self._sync_buffers()
            with grad_mode.no_grad():
                for index, batch in enumerate(loader):
                    inputs, target = self._batch(batch)
                    size = len(inputs) if isinstance(inputs, Tensor) and inputs.ndim else 1
                    if self.world_size > 1:
                        if index == 0:
                            self._check_same_batches(loader)
                        size = loader.batch_sampler.last_sizes[0]
                    if not size:
                        continue
                    output = self.model(inputs)
                    total += self.loss_fn(output, target).item() * size
                    count += size
                    for m in metrics:
                        m.update(output, target)
        finally:
            for module, mode in was_training:
                object.__setattr__(module, "training", mode)
        if self.world_size > 1:
            sums = self.world.allreduce(np.array([total, count], np.float64))
            total, count = float(sums[0]), int(sums[1])
            self._reduce_metrics(metrics)
        logs = {"loss": total / count if count else math.nan}
        logs.update({m.name: m.compute() for m in metrics})
        return logs

    def predict(self, x, *, batch_size: int = 32) -> Tensor:
        """The model's outputs for ``x`` (a tensor, array, dataset or loader), concatenated, without graphs."""
        from .autograd.ops.shape import cat

        loader = self._loader(x, None, batch_size, False, shard=False)  # every rank predicts everything
        outputs = []
        was_training = [(m, m.training) for m in self.model.modules()]
        self.model.eval()
        try:
            with grad_mode.no_grad():
                for batch in loader:
                    inputs, _ = self._batch(batch)
                    outputs.append(self.model(inputs))
        finally:
            for module, mode in was_training:
                object.__setattr__(module, "training", mode)
        return cat(outputs) if outputs else Tensor._make(np.zeros((0,), np.float32))

    # --------------------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Everything a resume needs: model, optimizer, scheduler, random streams, callbacks, progress."""
        return {
            "model": dict(self.model.state_dict()),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": None if self.scheduler is None else self.scheduler.state_dict(),
            "rng": {"global": default_generator.get_state(), "loader": self.loader_generator.get_state(),
                    "ranks": self._rank_rng_states or [default_generator.get_state()]},
            "world_size": self.world_size,
            "callbacks": self.callbacks.state_dict(),
            "epoch": self.epoch,
            "global_step": self.global_step,
            "history": self.history if self._epoch_logs is None else _append(copy.deepcopy(self.history),
                                                                               self._epoch_logs),
        }

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write the trainer's state to ``path`` (.npz, no pickle, atomically)."""
        return ckpt.save(self.state_dict(), path)

    def load_checkpoint(self, path: str | Path, resume: bool = False) -> int:
        """Restore a checkpoint written by ``save_checkpoint``; returns the epoch it was written after. With
        ``resume``, the run must have as many processes as the one that wrote it (each takes its random stream)."""
        state = ckpt.load(path)
        saved_size = int(state.get("world_size", 1))
        if resume and saved_size != self.world_size:
            raise RuntimeError(f"{path}: written by a run of {saved_size} process(es); resume it with the same "
                               f"number (this run has {self.world_size})")
        self.model.load_state_dict({k: v.to(self.device) for k, v in state["model"].items()})
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        ranks = state["rng"].get("ranks")
        same_world = saved_size == self.world_size and ranks and len(ranks) == self.world_size
        default_generator.set_state(ranks[self.rank] if same_world else state["rng"]["global"])
        if same_world:
            self._rank_rng_states = list(ranks)
        self.loader_generator.set_state(state["rng"]["loader"])
        self.callbacks.load_state_dict(state.get("callbacks", []))
        self.global_step = int(state["global_step"])
        self.history = {k: list(v) for k, v in state.get("history", {}).items()}
        self.epoch = int(state["epoch"])
        return self.epoch


def _append(history: dict, logs: dict) -> dict:
    """Add one epoch's logs to ``history`` (lists per key) and return it."""
    for key, value in logs.items():
        history.setdefault(key, []).append(value)
    return history


def _fresh(metric: Metric) -> Metric:
    """An empty copy of ``metric``: evaluation must not disturb the training epoch's totals."""
    fresh = copy.copy(metric)
    fresh.reset()
    return fresh
