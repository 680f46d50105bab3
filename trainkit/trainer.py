"""Trainer: Keras-like ``fit`` / ``evaluate`` / ``predict`` for a Module, with callbacks, checkpoints and resume.

``fit`` calls the callbacks (``trainkit.callbacks.base`` states their contract) and its strategy
(``trainkit.training.strategy`` lists its hooks) in this order::

    set_model(model), set_run_dir(run_dir), set_params({'epochs', 'steps_per_epoch', 'verbose'}); on_train_begin
    each epoch: on_epoch_begin
        each batch: on_train_batch_begin; train_step(batch): forward, loss, backward (scaled by
            1 / accumulate_steps); on_after_backward; when stepping: clipping, on_before_optimizer_step,
            optimizer.step(), zero_grad; on_train_batch_end(the step's logs: {'loss', 'step'})
        evaluate(val_data) (on_test_begin, test_step per batch, on_test_end), on_validation_end; scheduler step;
        on_epoch_end (its last callback, ``ResumePoint``, appends the epoch to run_dir/history.jsonl and writes
        run_dir/checkpoints/last.npz)
    on_train_end (on_exception instead when training raises)

Evaluation and prediction run under ``no_grad`` with the model in eval mode (``eval_mode``), and put it back as it
was. With ``strategy="ddp"`` (which ``"auto"`` picks when an MPI launcher started several processes) each rank trains
on its share of every batch, gradients, losses and metrics are reduced over the ranks, and only rank 0 prints,
writes checkpoints and runs the ``rank_zero_only`` callbacks (``trainkit.training.strategy.DDPStrategy``). The
Trainer writes no file itself: its callbacks do (``trainkit.callbacks.defaults``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .autograd.creation import tensor
from .autograd.ops.shape import cat
from .autograd.random import Generator, manual_seed
from .autograd.tensor import Tensor
from .callbacks.base import CallbackList
from .callbacks.defaults import add_defaults
from .callbacks.history import History
from .callbacks.nan import TerminateOnNaN
from .callbacks.progress import check_verbose, resolve_verbose
from .compiler import compile_train_step
from .data import DataLoader, Dataset
from .data.dataset import split_tail
from .layers.clip_grad import clip_grad_norm_
from .layers.module import Module
from .metrics import Metric, get_metric
from .registry import OPTIMIZERS, build
from .training import checkpoint as ckpt
from .training import loop
from .training.loop import BatchInfo, eval_mode
from .training.precision import Precision
from .training.strategy import Strategy, resolve

__all__ = ["DEFAULT_OPTIMIZER", "Trainer", "eval_mode"]

# The optimizer a Trainer makes when given none, as a config would name it.
DEFAULT_OPTIMIZER: dict[str, Any] = {"name": "SGD", "lr": 0.01}


class Trainer:
    """Train ``model`` with ``optimizer`` on ``loss``; report ``metrics``; call ``callbacks`` at each stage.

    ``optimizer=None`` makes ``DEFAULT_OPTIMIZER``; ``loss`` is a loss module, a callable or a name of
    ``trainkit.registry.LOSSES``; ``strategy`` is ``"auto"``, ``"ddp"``, ``"single_device"`` or a
    ``trainkit.training.strategy.Strategy`` (``bucket_cap_mb`` then does nothing), kept as ``distribute_strategy``,
    its name as ``strategy``. ``verbose`` is Keras' (0, 1, 2 or 'auto'; True means 'auto', False 0), the
    default of every ``fit``. ``precision`` is Lightning's ('32-true', 'bf16-mixed', '16-mixed' on a GPU,
    'bf16-true', ...; ``trainkit.training.precision``): the steps' forward and loss run under autocast with it.
    ``compile=True`` replays each batch's forward as captured array kernels (``trainkit.compile``). As in Keras,
    a subclass overrides ``train_step``, ``test_step`` or ``predict_step`` to change what ``fit``, ``evaluate`` or
    ``predict`` does with one batch.

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

    def __init__(
        self,
        model: Module,
        optimizer: Any = None,
        loss: Any = "mse",
        metrics=(),
        callbacks=(),
        *,
        device: Any = "cpu",
        seed: int | None = None,
        scheduler: Any = None,
        grad_clip_norm: float | None = None,
        accumulate_steps: int = 1,
        freeze=(),
        run_dir: str | Path | None = None,
        verbose: bool | int | str = True,
        strategy: str | Strategy = "auto",
        bucket_cap_mb: float = 25.0,
        terminate_on_nan: bool = False,
        collective_timeout_s: float | None = None,
        precision: str | int = "32-true",
        compile: bool = False,
    ):
        if accumulate_steps < 1:
            raise ValueError(f"accumulate_steps must be at least 1, got {accumulate_steps}")
        self.distribute_strategy = dist = resolve(strategy, bucket_cap_mb)
        self.strategy = dist.name  # a name, as it always was: "ddp" or "single_device"
        self.world, self.rank, self.world_size = dist.world, dist.rank, dist.world_size  # world: None on one device
        if self.world is not None:
            self.world.timeout = collective_timeout_s
        self.device = device = dist.root_device(device)
        process_seed = dist.process_seed(seed)
        if process_seed is not None:  # the one place the Trainer seeds: after the model was built, as in Keras
            manual_seed(process_seed)
        self.seed = seed
        self.precision = Precision(precision, device)
        self.model = self.precision.convert_module(model.to(device))
        self.forward = compile_train_step(self) if compile else self.model  # what the steps call the model through
        for name in freeze:
            try:
                self.model.get_submodule(name).requires_grad_(False)
            except AttributeError:
                names = [n for n, _ in self.model.named_modules() if n]
                raise ValueError(f"freeze: the model has no sub-module {name!r} (it has {names})") from None
        if optimizer is None:
            optimizer = build(OPTIMIZERS, **DEFAULT_OPTIMIZER, params=self.model.parameters())
        self.optimizer = optimizer
        self.loss_fn = loop.loss_function(loss)
        self.metrics: list[Metric] = [get_metric(m) for m in metrics]
        self.eval_metrics: list[Metric] = [loop.fresh(m) for m in self.metrics]  # what test_step updates
        self.scheduler = scheduler
        self.grad_clip_norm = grad_clip_norm
        self.accumulate_steps = accumulate_steps
        self.run_dir = Path(run_dir) if run_dir is not None else None
        verbose = check_verbose(verbose)  # on every rank, so that a bad value stops them all alike
        self.verbose = verbose if dist.is_main else 0  # only rank 0 prints
        self.stop_training = False
        self.epoch = self.global_step = self.epochs = self.epochs_done = 0
        self.history: dict[str, list] = {}
        self.history_rows: list[dict] = []  # {'epoch', **logs} per finished epoch: what history.jsonl holds
        self.pending_logs: dict | None = None  # the epoch whose end the callbacks handle: checkpoints include it
        self.current_batch: BatchInfo | None = None  # the batch fit is training (train_step reads it)
        self.loader_generator = Generator().manual_seed(0 if seed is None else seed)
        dist.setup(self)
        callbacks = list(callbacks)
        if terminate_on_nan and not any(isinstance(cb, TerminateOnNaN) for cb in callbacks):
            callbacks.append(TerminateOnNaN())
        self.callbacks = CallbackList(dist.select_callbacks(callbacks))
        self.callbacks.set_trainer(self)

    # ----------------------------------------------------------------------------------------------------- data
    def make_loader(
        self, x: Any, y: Any = None, *, batch_size: int = 32, shuffle: bool = False, shard: bool = True
    ) -> Any:
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
            dataset = loop.tensor_dataset(self.model, x, y)
            loader = DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=self.loader_generator)
        return self.distribute_strategy.shard_loader(loader) if shard else loader

    def unpack_batch(self, batch: Any) -> tuple[Any, Any]:
        """(inputs, target) of a batch, on the trainer's device; a batch without a target gives target None.

        >>> import trainkit
        >>> trainer = Trainer(trainkit.nn.Linear(1, 1), verbose=False)
        >>> x, y = trainer.unpack_batch([trainkit.ones(2, 1)])
        >>> tuple(x.shape), y
        ((2, 1), None)
        """
        x, y = (batch[0], batch[1] if len(batch) > 1 else None) if isinstance(batch, (tuple, list)) else (batch, None)
        return tuple(self.precision.convert_input(t.to(self.device)) if isinstance(t, Tensor) else t for t in (x, y))

    # ---------------------------------------------------------------------------------------------------- fit
    def fit(
        self,
        x: Any = None,
        y: Any = None,
        *,
        val_data: Any = None,
        epochs: int = 1,
        batch_size: int = 32,
        shuffle: bool = True,
        validation_split: float = 0.0,
        resume_from: str | Path | None = None,
        validation_data: Any = None,
        verbose: int | str | bool | None = None,
    ) -> History:
        """Train for ``epochs`` epochs (counting those done before a resume); returns a ``History`` whose
        ``.history`` maps each log key ('loss', 'val_loss', metrics, 'lr', monitor figures) to one value per
        epoch, the epochs before a resume included. ``validation_data`` is Keras' name for ``val_data``; NumPy
        float arrays are cast to the model's float dtype. ``verbose`` (None: the Trainer's) is Keras': 0 silent, 1 a
        progress bar (``ProgressBar``; a stream that is not a terminal gets 2's lines), 2 one line per epoch, 'auto'
        (and True) 1 on a terminal and 2 elsewhere."""
        if validation_data is not None and val_data is not None:
            raise ValueError("pass val_data or validation_data (Keras' name for it), not both")
        strategy = self.distribute_strategy
        val_data = val_data if validation_data is None else validation_data
        chosen = check_verbose(self.verbose if verbose is None else verbose)  # on every rank: all fail alike
        self.verbose = chosen if strategy.is_main else 0
        shown = resolve_verbose(self.verbose)  # 'auto': 1 on a terminal, 2 in a log, as in Keras 3
        if validation_split:
            if val_data is not None or isinstance(x, DataLoader):
                raise ValueError("validation_split needs x and y (or a Dataset) and no val_data")
            dataset = x if isinstance(x, Dataset) else loop.tensor_dataset(self.model, x, y)
            (x, val_data), y = split_tail(dataset, validation_split), None  # the last share validates, as in Keras
        train_loader = self.make_loader(x, y, batch_size=batch_size, shuffle=shuffle)
        val_loader = (
            None
            if val_data is None
            else self.make_loader(
                val_data[0] if isinstance(val_data, tuple) else val_data,
                val_data[1] if isinstance(val_data, tuple) else None,
                batch_size=batch_size,
            )
        )
        add_defaults(
            self.callbacks, shown, self.run_dir, "loss" if val_loader is None else "val_loss", strategy.is_main
        )  # before a resume: a checkpoint restores their state too
        first_epoch = 0 if resume_from is None else loop.resume(self, resume_from, epochs)
        strategy.gather_rng_states()
        self.stop_training = False
        self.epochs = epochs
        self.callbacks.set_model(self.model)
        self.callbacks.set_run_dir(self.run_dir)
        self.callbacks.set_params(
            {"epochs": epochs, "steps_per_epoch": loop.batch_count(train_loader), "verbose": shown}
        )
        loop.report_parameters(self)
        logs: dict = {}
        try:
            self.callbacks.on_train_begin(logs)
            for epoch in range(first_epoch, epochs):
                self.epoch = epoch
                logs = loop.train_epoch(self, train_loader, epoch)
                if val_loader is not None:
                    val_logs = {f"val_{k}": v for k, v in self.evaluate(val_loader, verbose=0).items()}
                    self.callbacks.on_validation_end(val_logs)
                    logs.update(val_logs)
                logs["lr"] = self.optimizer.param_groups[0]["lr"]
                loop.step_scheduler(self.scheduler, logs)
                strategy.gather_rng_states()  # every rank's random stream, for a resume that repeats this run
                self.pending_logs, self.epochs_done = logs, epoch + 1  # checkpoints written now include this epoch
                strategy.call_epoch_end(self.callbacks, epoch, logs)
                self._record(epoch, logs)
                self.stop_training = strategy.should_stop(self.stop_training)
                if self.stop_training:
                    break
            self.callbacks.on_train_end(logs)
        except BaseException as exc:
            if self.pending_logs is not None:  # stopped inside the epoch's end: it is not recorded, so not done
                self.pending_logs, self.epochs_done = None, self.epoch
            self.callbacks.on_exception(exc)
            strategy.on_exception(self, exc)
            raise
        result = History()
        result.history = self.history
        result.epoch = [row["epoch"] for row in self.history_rows]
        result.set_model(self.model)
        result.set_params(self.callbacks.params)
        return result

    def _record(self, epoch: int, logs: dict) -> None:
        """Keep the finished epoch's logs in ``history`` and ``history_rows`` (``ResumePoint`` has written them to
        the run folder's history file)."""
        self.history_rows.append({"epoch": epoch, **logs})
        for key, value in logs.items():
            self.history.setdefault(key, []).append(value)
        self.pending_logs = None

    # -------------------------------------------------------------------------------------------------- steps
    def train_step(self, batch: Any) -> dict:
        """One training step on ``batch`` (``(inputs, target)``), as Keras' ``train_step``: forward, loss, backward
        (the loss scaled by ``1 / accumulate_steps``), ``on_after_backward``; every ``accumulate_steps`` batches
        (and after an epoch's last) gradient clipping, ``on_before_optimizer_step``, ``optimizer.step()`` and
        ``zero_grad``; then the metrics. Returns the step's logs, which ``on_train_batch_end`` gets: ``'loss'`` (the
        batch's mean, over all ranks) and ``'step'`` (optimizer steps so far). ``fit`` weighs each step's ``'loss'``
        by the batch's size into the epoch's; a step whose logs lack it adds nothing.

        Override it to change what one step does; in data-parallel training every rank must call ``super()``'s
        alike (it reduces the loss over the ranks). Called outside ``fit``, it takes one optimizer step.

        >>> import trainkit
        >>> class Logged(Trainer):
        ...     def train_step(self, batch):
        ...         logs = super().train_step(batch)
        ...         logs["batch_size"] = len(batch[0])
        ...         return logs
        >>> trainer = Logged(trainkit.nn.Linear(1, 1), seed=0, verbose=False)
        >>> sorted(trainer.train_step((trainkit.ones(4, 1), trainkit.zeros(4, 1))))
        ['batch_size', 'loss', 'step']
        """
        x, y = self.unpack_batch(batch)
        strategy = self.distribute_strategy
        info = self.current_batch if self.current_batch is not None else BatchInfo.alone(x)
        value = 0.0
        if info.size:  # a rank whose share of a short last batch is empty adds nothing but still takes the step
            with self.precision.forward_context():
                output = self.forward(x)
                loss = self.loss_fn(output, y)
            scaled = loss / self.accumulate_steps if self.accumulate_steps > 1 else loss
            self.precision.backward(strategy.scale_loss(scaled, info.size, info.global_size))
            value = loss.item()
        step_now = info.steps(self.accumulate_steps)
        strategy.after_backward(step_now)
        self.callbacks.on_after_backward()
        if step_now:
            self.precision.unscale(self.optimizer)
            if self.grad_clip_norm is not None:
                clip_grad_norm_([p for p in self.model.parameters() if p.grad is not None], self.grad_clip_norm)
            self.callbacks.on_before_optimizer_step(self.optimizer)
            self.precision.step(self.optimizer)
            self.optimizer.zero_grad()
            self.global_step += 1
        if info.size:
            for m in self.metrics:
                m.update(output, y)
        return {"loss": strategy.reduce_batch_loss(value, info.size)[0], "step": self.global_step}

    def test_step(self, batch: Any) -> dict:
        """One evaluation batch (``(inputs, target)``), as Keras' ``test_step``: forward and loss, and the
        evaluation's metrics (``eval_metrics``) updated; returns ``{'loss': the batch's mean}``, which
        ``on_test_batch_end`` gets and ``evaluate`` weighs by the batch's size. ``evaluate`` runs it in eval mode
        without building graphs. Override it to change what evaluation measures.

        >>> import trainkit
        >>> trainer = Trainer(trainkit.nn.Linear(1, 1, bias=False), loss="l1", verbose=False)
        >>> trainer.test_step((trainkit.zeros(2, 1), trainkit.ones(2, 1)))
        {'loss': 1.0}
        """
        x, y = self.unpack_batch(batch)
        with self.precision.forward_context():
            output = self.forward(x)
            loss = self.loss_fn(output, y)
        for m in self.eval_metrics:
            m.update(output, y)
        return {"loss": loss.item()}

    def predict_step(self, batch: Any) -> Any:
        """The model's outputs for one batch (its inputs, or ``(inputs, ...)``), as Keras' ``predict_step``;
        ``predict`` runs it in eval mode without building graphs and concatenates what it returns.

        >>> import trainkit
        >>> trainer = Trainer(trainkit.nn.Linear(1, 3), verbose=False)
        >>> trainer.predict_step(trainkit.ones(2, 1)).shape
        trainkit.Size([2, 3])
        """
        with self.precision.forward_context():
            return self.forward(self.unpack_batch(batch)[0])

    # ------------------------------------------------------------------------------------- evaluate / predict
    def evaluate(self, x: Any = None, y: Any = None, *, batch_size: int = 32, verbose: Any = None) -> dict:
        """The loss and metrics over ``x`` (a loader, a dataset, or tensors with ``y``), without building graphs:
        ``test_step`` on every batch, between the callbacks' ``on_test_*`` hooks. ``verbose`` (None: the
        Trainer's) shows the pass as Keras' ``evaluate`` does (``callbacks.progress.PassProgress``)."""
        return loop.evaluate_loader(self, self.make_loader(x, y, batch_size=batch_size), verbose)

    def predict(self, x: Any, *, batch_size: int = 32, verbose: Any = None) -> Tensor:
        """The model's outputs for ``x`` (a tensor, array, dataset or loader), concatenated, without graphs:
        ``predict_step`` on every batch, between the callbacks' ``on_predict_*`` hooks; ``verbose`` as in
        ``evaluate``."""
        loader = self.make_loader(x, batch_size=batch_size, shard=False)  # every rank predicts everything
        outputs = loop.predict_loader(self, loader, verbose)
        return cat(outputs) if outputs else tensor(np.zeros((0,), np.float32))

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
