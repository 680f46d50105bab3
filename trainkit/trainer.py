"""Trainer: Keras-like ``fit`` / ``evaluate`` / ``predict`` for a Module, with callbacks, checkpoints and resume.

``fit`` calls the callbacks (``trainkit.callbacks.base`` states their contract) and its strategy
(``trainkit.training.strategy`` lists its hooks) in this order::

    set_model(model), set_run_dir(run_dir), set_params({'epochs', 'steps_per_epoch', 'verbose'}); on_train_begin
    each epoch: on_epoch_begin
        each batch: on_train_batch_begin; forward, loss, backward (scaled by 1 / accumulate_steps);
            on_after_backward; when stepping: clipping, on_before_optimizer_step, optimizer.step(), zero_grad;
            on_train_batch_end({'loss', 'step'})
        evaluate(val_data), on_validation_end; scheduler step; on_epoch_end; one line appended to
        run_dir/history.jsonl; run_dir/checkpoints/last.npz (state only: the history is in history.jsonl)
    on_train_end (on_exception instead when training raises)

Evaluation and prediction run under ``no_grad`` with the model in eval mode (``eval_mode``), and put it back as it
was. With ``strategy="ddp"`` (which ``"auto"`` picks when an MPI launcher started several processes) each rank trains
on its share of every batch, gradients, losses and metrics are reduced over the ranks, and only rank 0 prints,
writes checkpoints and runs the ``rank_zero_only`` callbacks (``trainkit.training.strategy.DDPStrategy``).
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .autograd import grad_mode
from .autograd.ops.shape import cat
from .autograd.random import Generator, manual_seed
from .autograd.tensor import Tensor
from .callbacks.base import CallbackList
from .callbacks.defaults import add_defaults
from .callbacks.history import History
from .callbacks.nan import TerminateOnNaN
from .data import DataLoader, Dataset, Subset, TensorDataset, as_tensor
from .layers.clip_grad import clip_grad_norm_
from .layers.module import Module
from .metrics import Metric, get_metric
from .optim.lr_scheduler import ReduceLROnPlateau
from .registry import LOSSES, OPTIMIZERS, UnknownNameError, build
from .training import checkpoint as ckpt
from .training.strategy import Strategy, resolve

# The optimizer a Trainer makes when given none, as a config would name it.
DEFAULT_OPTIMIZER: dict[str, Any] = {"name": "SGD", "lr": 0.01}


def _loss_fn(loss):
    if isinstance(loss, str):
        try:
            return LOSSES.get(loss)()
        except UnknownNameError as err:
            raise ValueError(str(err)) from None
    if loss is None or not callable(loss):
        raise TypeError(f"loss must be a loss module, a callable or a name, got {type(loss).__name__}")
    return loss


@contextlib.contextmanager
def eval_mode(model: Module) -> Iterator[Module]:
    """Run the body with ``model`` in eval mode and without building graphs, then give every sub-module back the
    ``training`` flag it had (a frozen BatchNorm left in eval stays so).

    >>> from trainkit import nn
    >>> net = nn.Dropout(0.5)
    >>> with eval_mode(net):
    ...     net.training
    False
    >>> net.training
    True
    """
    was_training = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with grad_mode.no_grad():
            yield model
    finally:
        for module, mode in was_training:
            object.__setattr__(module, "training", mode)  # not train(mode): that would reach the children too


class Trainer:
    """Train ``model`` with ``optimizer`` on ``loss``; report ``metrics``; call ``callbacks`` at each stage.

    ``optimizer=None`` makes ``DEFAULT_OPTIMIZER``; ``loss`` is a loss module, a callable or a name of
    ``trainkit.registry.LOSSES``; ``strategy`` is ``"auto"``, ``"ddp"``, ``"single_device"`` or a
    ``trainkit.training.strategy.Strategy`` (``bucket_cap_mb`` then does nothing), kept as ``distribute_strategy``,
    its name as ``strategy``.

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

    def __init__(self, model: Module, optimizer: Any = None, loss: Any = "mse", metrics=(), callbacks=(), *,
                 device: Any = "cpu", seed: int | None = None, scheduler: Any = None,
                 grad_clip_norm: float | None = None, accumulate_steps: int = 1, freeze=(),
                 run_dir: str | Path | None = None, verbose: bool = True, strategy: str | Strategy = "auto",
                 bucket_cap_mb: float = 25.0, terminate_on_nan: bool = False,
                 collective_timeout_s: float | None = None):
        if accumulate_steps < 1:
            raise ValueError(f"accumulate_steps must be at least 1, got {accumulate_steps}")
        self.distribute_strategy = dist = resolve(strategy, bucket_cap_mb)
        self.strategy = dist.name  # a name, as it always was: "ddp" or "single_device"
        self.world, self.rank, self.world_size = dist.world, dist.rank, dist.world_size  # world: None on one device
        if self.world is not None:
            self.world.timeout = collective_timeout_s
        self.device = device = dist.root_device(device)
        if seed is not None:
            manual_seed(seed)
        self.seed = seed
        self.model = model.to(device)
        for name in freeze:
            try:
                self.model.get_submodule(name).requires_grad_(False)
            except AttributeError:
                names = [n for n, _ in self.model.named_modules() if n]
                raise ValueError(f"freeze: the model has no sub-module {name!r} (it has {names})") from None
        if optimizer is None:
            optimizer = build(OPTIMIZERS, **DEFAULT_OPTIMIZER, params=self.model.parameters())
        self.optimizer = optimizer
        self.loss_fn = _loss_fn(loss)
        self.metrics: list[Metric] = [get_metric(m) for m in metrics]
        self.scheduler = scheduler
        self.grad_clip_norm = grad_clip_norm
        self.accumulate_steps = accumulate_steps
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.verbose = verbose and dist.is_main
        self.stop_training = False
        self.epoch = self.global_step = self.epochs = self.epochs_done = 0
        self.history: dict[str, list] = {}
        self.history_rows: list[dict] = []  # {'epoch', **logs} per finished epoch: what history.jsonl holds
        self._epoch_logs: dict | None = None
        self.loader_generator = Generator().manual_seed(0 if seed is None else seed)
        dist.setup(self)
        callbacks = list(callbacks)
        if terminate_on_nan and not any(isinstance(cb, TerminateOnNaN) for cb in callbacks):
            callbacks.append(TerminateOnNaN())
        self.callbacks = CallbackList(dist.select_callbacks(callbacks))
        self.callbacks.set_trainer(self)

    # ----------------------------------------------------------------------------------------------------- data
    def make_loader(self, x: Any, y: Any = None, *, batch_size: int = 32, shuffle: bool = False,
                    shard: bool = True) -> Any:
        """A loader from a DataLoader (as is), a Dataset, or tensors/arrays ``x`` (and ``y``); in data-parallel
        training (and with ``shard``), one that yields this rank's share of each of its batches.

        >>> import trainkit
        >>> trainer = Trainer(trainkit.nn.Linear(1, 1), verbose=False)
        >>> [len(b[0]) for b in trainer.make_loader(trainkit.zeros(5, 1), trainkit.zeros(5, 1), batch_size=2)]
        [2, 2, 1]
        """
        if isinstance(x, DataLoader):
            loader = x
        elif isinstance(x, Dataset):
            loader = DataLoader(x, batch_size=batch_size, shuffle=shuffle, generator=self.loader_generator)
        elif x is None:
            raise ValueError("no data: pass a DataLoader, a Dataset, or x and y")
        else:
            tensors = [self._tensor(t) for t in (x, y) if t is not None]
            loader = DataLoader(TensorDataset(*tensors), batch_size=batch_size, shuffle=shuffle,
                                generator=self.loader_generator)
        return self.distribute_strategy.shard_loader(loader) if shard else loader

    def _tensor(self, value: Any) -> Tensor:
        # as Keras: NumPy floats (float64 by default) take the model's float dtype, once, here
        dtype = next((p.dtype for p in self.model.parameters() if p.is_floating_point()), None)
        return as_tensor(value, dtype) if dtype is not None else as_tensor(value)

    def unpack_batch(self, batch: Any) -> tuple[Any, Any]:
        """(inputs, target) of a batch, on the trainer's device; a batch without a target gives target None.

        >>> import trainkit
        >>> trainer = Trainer(trainkit.nn.Linear(1, 1), verbose=False)
        >>> x, y = trainer.unpack_batch([trainkit.ones(2, 1)])
        >>> tuple(x.shape), y
        ((2, 1), None)
        """
        x, y = (batch[0], batch[1] if len(batch) > 1 else None) if isinstance(batch, (tuple, list)) else (batch, None)
        return tuple(t.to(self.device) if isinstance(t, Tensor) else t for t in (x, y))

    # ---------------------------------------------------------------------------------------------------- fit
    def fit(self, x: Any = None, y: Any = None, *, val_data: Any = None, epochs: int = 1, batch_size: int = 32,
            shuffle: bool = True, validation_split: float = 0.0, resume_from: str | Path | None = None,
            validation_data: Any = None, verbose: int | bool | None = None) -> History:
        """Train for ``epochs`` epochs (counting those done before a resume); returns a ``History`` whose
        ``.history`` maps each log key ('loss', 'val_loss', metrics, 'lr', monitor figures) to one value per
        epoch, the epochs before a resume included. ``validation_data`` is Keras' name for ``val_data``; NumPy
        float arrays are cast to the model's float dtype. ``verbose``: 0, 1 or 2 as in Keras (see ``add_defaults``)."""
        if validation_data is not None and val_data is not None:
            raise ValueError("pass val_data or validation_data (Keras' name for it), not both")
        val_data = val_data if validation_data is None else validation_data
        self.verbose = self.verbose if verbose is None else verbose if self.distribute_strategy.is_main else 0
        if validation_split:
            if val_data is not None or isinstance(x, DataLoader):
                raise ValueError("validation_split needs x and y (or a Dataset) and no val_data")
            dataset = x if isinstance(x, Dataset) else TensorDataset(*(self._tensor(t) for t in (x, y)))
            n_val = int(len(dataset) * validation_split)
            n = len(dataset) - n_val  # the last share validates, as in Keras
            x, y = Subset(dataset, range(n)), None
            val_data = Subset(dataset, range(n, len(dataset)))
        train_loader = self.make_loader(x, y, batch_size=batch_size, shuffle=shuffle)
        val_loader = None if val_data is None else self.make_loader(
            val_data[0] if isinstance(val_data, tuple) else val_data,
            val_data[1] if isinstance(val_data, tuple) else None, batch_size=batch_size)
        add_defaults(self.callbacks, self.verbose, self.run_dir, "loss" if val_loader is None else "val_loss",
                     self.distribute_strategy.is_main)  # before a resume: a checkpoint restores their state too
        first_epoch = 0 if resume_from is None else self._resume(resume_from, epochs)
        strategy = self.distribute_strategy
        if self.run_dir is not None and strategy.is_main:  # this run's file holds the epochs restored, if any
            ckpt.write_history(self.run_dir / ckpt.HISTORY_FILE, self.history_rows)
        strategy.gather_rng_states()
        self.stop_training = False
        self.epochs = epochs
        self.callbacks.set_model(self.model)
        self.callbacks.set_run_dir(self.run_dir)
        self.callbacks.set_params({"epochs": epochs, "steps_per_epoch": _length(train_loader),
                                   "verbose": self.verbose})
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
                strategy.gather_rng_states()  # every rank's random stream, for a resume that repeats this run
                self._epoch_logs, self.epochs_done = logs, epoch + 1  # checkpoints written now include this epoch
                strategy.call_epoch_end(self.callbacks, epoch, logs)
                self._record(epoch, logs)
                if (self.run_dir is not None and strategy.is_main and math.isfinite(logs["loss"])
                        and ckpt.finite_weights(self.model)):  # the resume point; after a bad epoch the good one stays
                    self.save_checkpoint(self.run_dir / "checkpoints" / "last.npz")
                self.stop_training = strategy.should_stop(self.stop_training)
                if self.stop_training:
                    break
            self.callbacks.on_train_end(logs)
        except BaseException as exc:
            if self._epoch_logs is not None:  # stopped inside the epoch's end: it is not recorded, so not done
                self._epoch_logs, self.epochs_done = None, self.epoch
            self.callbacks.on_exception(exc)
            strategy.on_exception(self, exc)
            raise
        result = History()
        result.history = self.history
        return result

    def _resume(self, path: str | Path, epochs: int) -> int:
        """Load the checkpoint to resume from; the first epoch to run."""
        self.load_checkpoint(path, resume=True)
        line = ckpt.resume_point(path, self.epochs_done, epochs, self.epoch)  # raises when nothing is left to do
        if self.verbose:
            print(line)
        return self.epochs_done

    def _record(self, epoch: int, logs: dict) -> None:
        """Keep the finished epoch's logs: in ``history``, and as one line of the run folder's history file."""
        row = {"epoch": epoch, **logs}
        self.history_rows.append(row)
        for key, value in logs.items():
            self.history.setdefault(key, []).append(value)
        self._epoch_logs = None
        if self.run_dir is not None and self.distribute_strategy.is_main:
            ckpt.append_history(self.run_dir / ckpt.HISTORY_FILE, row)

    def _report_parameters(self) -> None:
        params = list(self.model.parameters())
        trainable = sum(p.numel() for p in params if p.requires_grad)
        self.parameter_counts = {"trainable": trainable, "frozen": sum(p.numel() for p in params) - trainable}
        if self.verbose:
            print(f"Trainable params: {trainable:,} | Frozen params: {self.parameter_counts['frozen']:,}")

    def _train_epoch(self, loader: Any, epoch: int) -> dict:
        strategy = self.distribute_strategy
        self.model.train()
        self.callbacks.on_epoch_begin(epoch, {})
        for m in self.metrics:
            m.reset()
        total, count = 0.0, 0
        n_batches = _length(loader)
        self.optimizer.zero_grad()
        for index, batch in enumerate(loader):
            x, y = self.unpack_batch(batch)
            size, global_size = strategy.before_batch(loader, index, x)
            self.callbacks.on_train_batch_begin(index, {})
            value = 0.0
            if size:  # a rank whose share of a short last batch is empty adds nothing but still takes the step
                output = self.model(x)
                loss = self.loss_fn(output, y)
                scaled = loss / self.accumulate_steps if self.accumulate_steps > 1 else loss
                strategy.scale_loss(scaled, size, global_size).backward()
                value = loss.item()
            last = n_batches is not None and index + 1 == n_batches
            step_now = (index + 1) % self.accumulate_steps == 0 or last
            strategy.after_backward(step_now)
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
            value, size = strategy.reduce_batch_loss(value, size)
            total += value * size
            count += size
            self.callbacks.on_train_batch_end(index, {"loss": value, "step": self.global_step})
            self.stop_training = strategy.should_stop(self.stop_training)
            if self.stop_training:
                break
        strategy.reduce_metrics(self.metrics)
        logs = {"loss": total / count if count else math.nan}
        logs.update({m.name: m.compute() for m in self.metrics})
        return logs

    def _step_scheduler(self, logs: dict) -> None:
        if isinstance(self.scheduler, ReduceLROnPlateau):
            self.scheduler.step(logs.get("val_loss", logs["loss"]))
        elif self.scheduler is not None:
            self.scheduler.step()

    # ------------------------------------------------------------------------------------- evaluate / predict
    def evaluate(self, x: Any = None, y: Any = None, *, batch_size: int = 32) -> dict:
        """The loss and metrics over ``x`` (a loader, a dataset, or tensors with ``y``), without building graphs."""
        strategy = self.distribute_strategy
        loader = self.make_loader(x, y, batch_size=batch_size)
        metrics = [_fresh(m) for m in self.metrics]
        total, count = 0.0, 0
        with eval_mode(self.model):
            for index, batch in enumerate(loader):
                inputs, target = self.unpack_batch(batch)
                size = strategy.before_batch(loader, index, inputs, training=False)[0]
                if not size:
                    continue
                output = self.model(inputs)
                total += self.loss_fn(output, target).item() * size
                count += size
                for m in metrics:
                    m.update(output, target)
        total, count = strategy.reduce_sums(total, count)
        strategy.reduce_metrics(metrics)
        logs = {"loss": total / count if count else math.nan}
        logs.update({m.name: m.compute() for m in metrics})
        return logs

    def predict(self, x: Any, *, batch_size: int = 32) -> Tensor:
        """The model's outputs for ``x`` (a tensor, array, dataset or loader), concatenated, without graphs."""
        loader = self.make_loader(x, batch_size=batch_size, shard=False)  # every rank predicts everything
        with eval_mode(self.model):
            outputs = [self.model(self.unpack_batch(batch)[0]) for batch in loader]
        return cat(outputs) if outputs else Tensor._make(np.zeros((0,), np.float32))

    # --------------------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Everything a resume needs (``training.checkpoint.trainer_state``): model, optimizer, scheduler, random
        streams, callbacks, progress, and where the epochs' history is (not the history itself)."""
        return ckpt.trainer_state(self)

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write the trainer's state to ``path`` (.npz, no pickle, atomically)."""
        return ckpt.save(self.state_dict(), path)

    def load_checkpoint(self, path: str | Path, resume: bool = False) -> int:
        """Restore a checkpoint written by ``save_checkpoint``; returns the epoch it was written in
        (``epochs_done`` then counts the finished epochs). With ``resume``, the run must have as many processes as
        the one that wrote it (each takes its random stream)."""
        ckpt.restore(self, ckpt.load(path, self.model), path, resume)
        return self.epoch

def _length(loader: Any) -> int | None:
    """The number of batches of ``loader``, or None when it has no length (an iterable dataset, say)."""
    return len(loader) if hasattr(loader, "__len__") else None


def _fresh(metric: Metric) -> Metric:
    """An empty copy of ``metric``: evaluation must not disturb the training epoch's totals."""
    fresh = copy.copy(metric)
    fresh.reset()
    return fresh
