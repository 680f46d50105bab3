"""Trainer: Keras-like ``fit`` / ``evaluate`` / ``predict`` for a Module, with callbacks, checkpoints and resume.

One optimizer step is: forward, loss, ``backward`` (scaled by ``1 / accumulate_steps``), the ``on_after_backward``
hooks, clipping, ``on_before_optimizer_step``, ``optimizer.step()``, ``zero_grad``. Evaluation and prediction run
under ``no_grad`` with the model in eval mode, and put it back as it was.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np

from . import checkpoint as ckpt
from .autograd import grad_mode
from .autograd.random import Generator, default_generator, manual_seed
from .autograd.tensor import Tensor
from .callbacks.history import History
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
                 accumulate_steps: int = 1, freeze=(), run_dir: str | Path | None = None, verbose: bool = True):
        if accumulate_steps < 1:
            raise ValueError(f"accumulate_steps must be at least 1, got {accumulate_steps}")
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
        self.verbose = verbose
        self.stop_training = False
        self.epoch = 0
        self.global_step = 0
        self.history: dict[str, list] = {}
        self.epochs = 0
        self._epoch_logs: dict | None = None
        self.loader_generator = Generator().manual_seed(0 if seed is None else seed)
        from .callbacks.base import CallbackList

        self.callbacks = CallbackList(list(callbacks))
        self.callbacks.set_trainer(self)

    # ----------------------------------------------------------------------------------------------------- data
    def _loader(self, data, y, batch_size: int, shuffle: bool):
        """A loader from a DataLoader (as is), a Dataset, or tensors/arrays ``x`` (and ``y``)."""
        from .data import DataLoader, Dataset, TensorDataset

        if isinstance(data, DataLoader):
            return data
        if isinstance(data, Dataset):
            return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=self.loader_generator)
        if data is None:
            raise ValueError("no data: pass a DataLoader, a Dataset, or x and y")
        tensors = [t if isinstance(t, Tensor) else Tensor._make(np.asarray(t)) for t in (data, y) if t is not None]
        return DataLoader(TensorDataset(*tensors), batch_size=batch_size, shuffle=shuffle,
                          generator=self.loader_generator)

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
            first_epoch = self.load_checkpoint(resume_from) + 1
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
                self._epoch_logs = logs  # checkpoints written by callbacks now must include this epoch
                self.callbacks.on_epoch_end(epoch, logs)
                self._epoch_logs = None
                _append(self.history, logs)
                if self.run_dir is not None and math.isfinite(logs["loss"]):
                    # the resume point; after a non-finite epoch the last good one stays
                    self.save_checkpoint(self.run_dir / "checkpoints" / "last.npz")
                if self.stop_training:
                    break
            self.callbacks.on_train_end(logs)
        except BaseException as exc:
            self.callbacks.on_exception(exc)
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
        self.optimizer.zero_grad()
        for index, batch in enumerate(loader):
            x, y = self._batch(batch)
            self.callbacks.on_train_batch_begin(index, {})
            output = self.model(x)
            loss = self.loss_fn(output, y)
            (loss / self.accumulate_steps if self.accumulate_steps > 1 else loss).backward()
            self.callbacks.on_after_backward()
            last = n_batches is not None and index + 1 == n_batches
            if (index + 1) % self.accumulate_steps == 0 or last:
                if self.grad_clip_norm is not None:
                    clip_grad_norm_([p for p in self.model.parameters() if p.grad is not None], self.grad_clip_norm)
                self.callbacks.on_before_optimizer_step(self.optimizer)
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.global_step += 1
            value = loss.item()
            size = len(x) if isinstance(x, Tensor) and x.ndim else 1
            total += value * size
            count += size
            for m in self.metrics:
                m.update(output, y)
            self.callbacks.on_train_batch_end(index, {"loss": value, "step": self.global_step})
            if self.stop_training:
                break
        logs = {"loss": total / count if count else math.nan}
        logs.update({m.name: m.compute() for m in self.metrics})
        return logs

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
            with grad_mode.no_grad():
                for batch in loader:
                    inputs, target = self._batch(batch)
                    output = self.model(inputs)
                    size = len(inputs) if isinstance(inputs, Tensor) and inputs.ndim else 1
                    total += self.loss_fn(output, target).item() * size
                    count += size
                    for m in metrics:
                        m.update(output, target)
        finally:
            for module, mode in was_training:
                object.__setattr__(module, "training", mode)
        logs = {"loss": total / count if count else math.nan}
        logs.update({m.name: m.compute() for m in metrics})
        return logs

    def predict(self, x, *, batch_size: int = 32) -> Tensor:
        """The model's outputs for ``x`` (a tensor, array, dataset or loader), concatenated, without graphs."""
        from .autograd.ops.shape import cat

        loader = self._loader(x, None, batch_size, False)
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
            "rng": {"global": default_generator.get_state(), "loader": self.loader_generator.get_state()},
            "callbacks": self.callbacks.state_dict(),
            "epoch": self.epoch,
            "global_step": self.global_step,
            "history": self.history if self._epoch_logs is None else _append(copy.deepcopy(self.history),
                                                                               self._epoch_logs),
        }

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write the trainer's state to ``path`` (.npz, no pickle, atomically)."""
        return ckpt.save(self.state_dict(), path)

    def load_checkpoint(self, path: str | Path) -> int:
        """Restore a checkpoint written by ``save_checkpoint``; returns the epoch it was written after."""
        state = ckpt.load(path)
        self.model.load_state_dict({k: v.to(self.device) for k, v in state["model"].items()})
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        default_generator.set_state(state["rng"]["global"])
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
