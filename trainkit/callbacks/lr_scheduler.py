"""``LRSchedulerCallback``: step a learning-rate scheduler once per epoch or once per optimizer step."""

from __future__ import annotations

from typing import Any

from ..autograd.user_warnings import warn_user
from ..metrics import direction
from ..optim.lr_scheduler import ReduceLROnPlateau
from .base import Callback, Logs, jsonable, missing_key, monitored


class LRSchedulerCallback(Callback):
    """Calls ``scheduler.step()`` at each epoch end (``interval='epoch'``) or after each optimizer step
    (``interval='step'``, at batch end).

    ``ReduceLROnPlateau`` gets the monitored value: ``scheduler.step(logs[monitor])``, ``monitor`` defaulting to
    ``'val_loss'``; an epoch whose logs lack it does not step the scheduler (with a warning, once). Its ``mode``
    is PyTorch's (``'min'`` unless given): when training begins, a ``mode`` that contradicts the monitored
    quantity's direction (``mode='min'`` on ``'val_accuracy'``, see ``trainkit.metrics.direction``) is warned
    about, once. The epoch logs get ``'lr'`` (the first group's rate after the step) when the trainer has not put
    one there.

    Give a scheduler either to the trainer or to this callback, not both: each would step it. When it is not the
    trainer's, its state travels in this callback's ``state_dict()``.

    Args:
        scheduler (Any, required): the learning-rate scheduler to step (``trainkit.optim.lr_scheduler``).
        interval (str, default 'epoch'): ``'epoch'``: step at each epoch's end; ``'step'``: after each optimizer
            step.
        monitor (str | None, default None): the key of the epoch logs a ``ReduceLROnPlateau`` steps on; None:
            ``'val_loss'`` for it, nothing for other schedulers.

    >>> import trainkit
    >>> from trainkit.optim import SGD
    >>> from trainkit.optim.lr_scheduler import StepLR
    >>> opt = SGD([trainkit.zeros(1, requires_grad=True)], lr=1.0)
    >>> cb = LRSchedulerCallback(StepLR(opt, step_size=1, gamma=0.5))
    >>> opt.step()
    >>> logs = {}
    >>> cb.on_epoch_end(0, logs); logs
    {'lr': 0.5}
    """

    def __init__(self, scheduler: Any, interval: str = "epoch", monitor: str | None = None) -> None:
        super().__init__()
        if interval not in ("epoch", "step"):
            raise ValueError(f"interval must be 'epoch' or 'step', got {interval!r}")
        self.scheduler = scheduler
        self.interval = interval
        self.plateau = isinstance(scheduler, ReduceLROnPlateau)
        self.monitor = monitor if monitor is not None or not self.plateau else "val_loss"
        self._warned_missing = False
        self._warned_mode = False

    def on_train_begin(self, logs: Logs | None = None) -> None:
        if not self.plateau or self._warned_mode:
            return
        better = direction(self.monitor, getattr(self.trainer, "metrics", None) or ())
        if better is not None and better != getattr(self.scheduler, "mode", better):
            self._warned_mode = True
            warn_user(
                f"LRSchedulerCallback: ReduceLROnPlateau has mode={self.scheduler.mode!r}, but a "
                f"{'higher' if better == 'max' else 'lower'} {self.monitor!r} is better; "
                f"pass ReduceLROnPlateau(..., mode={better!r}) so that it lowers the rate when {self.monitor!r} "
                "stops improving"
            )

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        if self.interval == "step":
            self._step(logs)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if self.interval == "epoch":
            self._step(logs)
        if logs is not None and "lr" not in logs:
            logs["lr"] = float(self.scheduler.optimizer.param_groups[0]["lr"])

    def _step(self, logs: Logs | None) -> None:
        if not self.plateau:
            self.scheduler.step()
            return
        value = monitored(logs, self.monitor)
        if value is None:
            if not self._warned_missing:
                warn_user(
                    missing_key("LRSchedulerCallback (ReduceLROnPlateau)", self.monitor, logs)
                    + "; the scheduler is not stepped"
                )
                self._warned_missing = True
            return
        self.scheduler.step(value)

    def _owned_by_trainer(self) -> bool:
        return self.trainer is not None and self.trainer.scheduler is self.scheduler

    def state_dict(self) -> dict[str, Any]:
        if self._owned_by_trainer():
            return {}  # the trainer's checkpoint already holds it
        return {"scheduler": jsonable(self.scheduler.state_dict())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "scheduler" in state and not self._owned_by_trainer():
            self.scheduler.load_state_dict(state["scheduler"])

    def __repr__(self) -> str:
        return f"LRSchedulerCallback({type(self.scheduler).__name__}, interval={self.interval!r})"
