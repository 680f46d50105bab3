"""The Trainer's passes over a loader: a training epoch, an evaluation and a prediction, each calling the trainer's
step method (``train_step``, ``test_step``, ``predict_step``) once a batch between the callbacks' batch hooks, and
the small pieces of bookkeeping around them (the batch being trained, the model in eval mode, a resume's start).

The step methods live on the Trainer, where a subclass overrides them; this module only drives them.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..autograd import grad_mode
from ..autograd.tensor import Tensor
from ..callbacks.progress import PassProgress, check_verbose
from ..data import TensorDataset, as_tensor
from ..layers.module import Module
from ..metrics import Metric
from ..optim.lr_scheduler import ReduceLROnPlateau
from ..registry import LOSSES, UnknownNameError
from . import checkpoint as ckpt

if TYPE_CHECKING:
    from ..trainer import Trainer


@dataclass(frozen=True)
class BatchInfo:
    """Where a training batch stands: its ``index`` in the epoch, this process's and the whole batch's sample
    counts (``size``, ``global_size``; they differ in data-parallel training) and whether it is the epoch's ``last``.

    >>> import trainkit
    >>> BatchInfo.alone(trainkit.zeros(3, 2))
    BatchInfo(index=0, size=3, global_size=3, last=True)
    """

    index: int
    size: int
    global_size: int
    last: bool

    @classmethod
    def alone(cls, inputs: Any) -> BatchInfo:
        """A batch trained outside an epoch (``train_step`` called by hand): the whole batch, and the last."""
        size = len(inputs) if isinstance(inputs, Tensor) and inputs.ndim else 1
        return cls(0, size, size, True)

    def steps(self, accumulate_steps: int) -> bool:
        """Whether the optimizer steps after this batch: every ``accumulate_steps`` batches, and after the last."""
        return self.last or (self.index + 1) % accumulate_steps == 0


def loss_function(loss: Any) -> Any:
    """The loss a Trainer calls: a loss module or callable as it is, a name of ``LOSSES`` built.

    >>> loss_function("mse")
    MSELoss()
    """
    if isinstance(loss, str):
        try:
            return LOSSES.get(loss)()
        except UnknownNameError as err:
            raise ValueError(str(err)) from None
    if loss is None or not callable(loss):
        raise TypeError(f"loss must be a loss module, a callable or a name, got {type(loss).__name__}")
    return loss


def tensor_dataset(model: Module, *values: Any) -> TensorDataset:
    """A ``TensorDataset`` of ``values`` (tensors or arrays; None left out) in the model's floating dtype: as in
    Keras, NumPy floats (float64 by default) take the model's dtype, once, here.

    >>> import numpy as np, trainkit
    >>> tensor_dataset(trainkit.nn.Linear(1, 1), np.zeros((2, 1)), None)[0][0].dtype
    trainkit.float32
    """
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    return TensorDataset(*(as_tensor(v, dtype) if dtype is not None else as_tensor(v) for v in values if v is not None))


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


def batch_count(loader: Any) -> int | None:
    """The number of batches of ``loader``, or None when it has no length (an iterable dataset, say)."""
    return len(loader) if hasattr(loader, "__len__") else None


def fresh(metric: Metric) -> Metric:
    """An empty copy of ``metric``: evaluation must not disturb the training epoch's totals."""
    new = copy.copy(metric)
    new.reset()
    return new


def train_epoch(trainer: Trainer, loader: Any, epoch: int) -> dict:
    """One epoch: ``train_step`` on every batch; the epoch's logs ('loss', the size-weighted mean of the steps'
    'loss' over all ranks, and the metrics)."""
    strategy, callbacks = trainer.distribute_strategy, trainer.callbacks
    trainer.model.train()
    callbacks.on_epoch_begin(epoch, {})
    for m in trainer.metrics:
        m.reset()
    total, count = 0.0, 0
    n_batches = batch_count(loader)
    trainer.optimizer.zero_grad()
    try:
        for index, batch in enumerate(loader):
            batch = trainer.unpack_batch(batch)
            size, global_size = strategy.before_batch(loader, index, batch[0])
            last = n_batches is not None and index + 1 == n_batches
            trainer.current_batch = BatchInfo(index, size, global_size, last)
            callbacks.on_train_batch_begin(index, {})
            logs = trainer.train_step(batch)
            if "loss" in logs:  # the steps' losses are means over the whole batch: weigh them by its size
                total += logs["loss"] * global_size
                count += global_size
            callbacks.on_train_batch_end(index, logs)
            trainer.stop_training = strategy.should_stop(trainer.stop_training)
            if trainer.stop_training:
                break
    finally:
        trainer.current_batch = None
    strategy.reduce_metrics(trainer.metrics)
    logs = {"loss": total / count if count else math.nan}
    logs.update({m.name: m.compute() for m in trainer.metrics})
    return logs


def progress(trainer: Trainer, verbose: Any, loader: Any) -> PassProgress:
    """The display of an evaluation or prediction pass over ``loader``: ``verbose`` as Keras takes it (None: the
    trainer's), shown by the main process only."""
    chosen = trainer.verbose if verbose is None else check_verbose(verbose)  # on every rank: all fail alike
    return PassProgress(chosen if trainer.distribute_strategy.is_main else 0, batch_count(loader))


def evaluate_loader(trainer: Trainer, loader: Any, verbose: Any = 0) -> dict:
    """``test_step`` on every batch of ``loader`` in eval mode, between the ``on_test_*`` hooks; the loss (the
    size-weighted mean of the steps' 'loss' over all ranks) and the metrics. ``verbose`` shows its progress
    (``PassProgress``)."""
    strategy, callbacks = trainer.distribute_strategy, trainer.callbacks
    trainer.eval_metrics = [fresh(m) for m in trainer.metrics]
    total, count = 0.0, 0
    shown = progress(trainer, verbose, loader)
    callbacks.on_test_begin({})
    try:
        with eval_mode(trainer.model):
            for index, batch in enumerate(loader):
                batch = trainer.unpack_batch(batch)
                size = strategy.before_batch(loader, index, batch[0], training=False)[0]
                if size:  # else this rank's share of a short batch is empty
                    callbacks.on_test_batch_begin(index, {})
                    logs = trainer.test_step(batch)
                    total += logs["loss"] * size
                    count += size
                    callbacks.on_test_batch_end(index, logs)
                shown.update(index + 1, [f"loss: {total / count:.4g}"] if count else [])
    except BaseException:
        shown.close()
        raise
    total, count = strategy.reduce_sums(total, count)
    strategy.reduce_metrics(trainer.eval_metrics)
    logs = {"loss": total / count if count else math.nan}
    logs.update({m.name: m.compute() for m in trainer.eval_metrics})
    callbacks.on_test_end(logs)
    shown.finish(logs)
    return logs


def predict_loader(trainer: Trainer, loader: Any, verbose: Any = 0) -> list:
    """``predict_step`` on every batch of ``loader`` in eval mode, between the ``on_predict_*`` hooks; the
    outputs, one a batch. ``verbose`` shows its progress (``PassProgress``)."""
    callbacks, outputs = trainer.callbacks, []
    shown = progress(trainer, verbose, loader)
    callbacks.on_predict_begin({})
    try:
        with eval_mode(trainer.model):
            for index, batch in enumerate(loader):
                callbacks.on_predict_batch_begin(index, {})
                outputs.append(trainer.predict_step(trainer.unpack_batch(batch)))
                callbacks.on_predict_batch_end(index, {"outputs": outputs[-1]})
                shown.update(index + 1)
    except BaseException:
        shown.close()
        raise
    callbacks.on_predict_end({})
    shown.finish()
    return outputs


def resume(trainer: Trainer, path: str | Path, epochs: int) -> int:
    """Load the checkpoint to resume from and print where the run resumes; the first epoch to run."""
    trainer.load_checkpoint(path, resume=True)
    line = ckpt.resume_point(path, trainer.epochs_done, epochs, trainer.epoch)  # raises when nothing is left to do
    if trainer.verbose:
        print(line)
    return trainer.epochs_done


def report_parameters(trainer: Trainer) -> None:
    """Count the trainable and frozen parameters into ``trainer.parameter_counts`` and print them."""
    params = list(trainer.model.parameters())
    trainable = sum(p.numel() for p in params if p.requires_grad)
    trainer.parameter_counts = {"trainable": trainable, "frozen": sum(p.numel() for p in params) - trainable}
    if trainer.verbose:
        print(f"Trainable params: {trainable:,} | Frozen params: {trainer.parameter_counts['frozen']:,}")


def step_scheduler(scheduler: Any, logs: dict) -> None:
    """Step the learning-rate ``scheduler`` after an epoch (``ReduceLROnPlateau`` on val_loss, else loss)."""
    if isinstance(scheduler, ReduceLROnPlateau):
        scheduler.step(logs.get("val_loss", logs["loss"]))
    elif scheduler is not None:
        scheduler.step()
