"""``EarlyStopping``: stop when a monitored value has stopped improving."""

from __future__ import annotations

from typing import Any

from ..autograd.user_warnings import warn_user
from .base import Logs
from .monitor import MonitorCallback


class EarlyStopping(MonitorCallback):
    """Stops training once ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs.

    An epoch improves when its value beats the best so far by more than ``min_delta`` (below it when lower is
    better, above it when higher is). ``mode='auto'`` (the default, as in Keras) tells which from the monitored
    name: lower for ``val_loss`` and the errors, higher for ``val_accuracy`` and the scores, and what a metric of
    the Trainer declares (``Metric.higher_is_better``); see ``MonitorCallback``. After ``patience`` epochs in a row
    without improvement (as in Keras), ``trainer.stop_training`` is set; ``patience=0`` and ``patience=1`` stop at
    the first epoch that does not improve.

    ``restore_best_weights=True`` keeps a copy of the weights of the best epoch (one extra copy of the model's
    parameters and buffers, replaced at each improvement) and loads it into the model at train end.
    ``stopped_epoch`` is the epoch at which it stopped training and ``restored_epoch`` the epoch whose weights it
    loaded back at train end (None when it did not); both count from 0, as the ``epoch`` the callbacks get.

    ``state_dict()`` carries the counters (best value, best epoch, epochs waited), so a resumed run keeps
    counting; the copy of the best weights is not part of it (``ModelCheckpoint``'s ``best.npz`` holds them).

    Args:
        monitor (str, default 'val_loss'): the key of the epoch logs to watch (``'val_accuracy'``, ``'loss'``,
            ``'val_<metric>'``).
        min_delta (float, default 0): how much a value must beat the best by to count as an improvement.
        patience (int, default 0): epochs in a row without improvement after which training stops.
        mode (str, default 'auto'): ``'auto'``, ``'min'`` or ``'max'``: whether a lower or a higher value is
            better; ``'auto'`` tells from the monitored name.
        restore_best_weights (bool, default False): load the weights of the best epoch back into the model when
            training ends.

    >>> stopper = EarlyStopping(patience=1)
    >>> class Trainer:
    ...     stop_training = False
    >>> stopper.set_trainer(Trainer())
    >>> for epoch, val_loss in enumerate([1.0, 0.8, 0.9]):
    ...     stopper.on_epoch_end(epoch, {"val_loss": val_loss})
    >>> stopper.trainer.stop_training, stopper.best, stopper.stopped_epoch
    (True, 0.8, 2)
    >>> EarlyStopping(monitor="val_accuracy").resolve_mode()
    'max'
    """

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0,
        patience: int = 0,
        mode: str = "auto",
        restore_best_weights: bool = False,
    ) -> None:
        super().__init__(monitor, mode, min_delta)
        self.patience = patience
        self.restore_best_weights = restore_best_weights
        self.wait = 0
        self.stopped_epoch: int | None = None
        self.best_weights: dict[str, Any] | None = None
        self.restored_epoch: int | None = None  # the epoch whose weights on_train_end put back

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        current = self.current(logs)
        if current is None:
            return
        if self.is_improvement(current):
            self.best, self.best_epoch, self.wait = current, epoch, 0
            if self.restore_best_weights:
                # clone: state_dict() shares storage with the live parameters, which the optimizer changes
                self.best_weights = {k: v.clone() for k, v in self.model.state_dict().items()}
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            self.trainer.stop_training = True

    def on_train_end(self, logs: Logs | None = None) -> None:
        if not self.restore_best_weights:
            return
        if self.best_weights is None:
            if self.best_epoch is not None:
                warn_user(
                    f"EarlyStopping cannot restore the weights of epoch {self.best_epoch + 1}: they were seen before "
                    "the run was resumed (load best.npz from ModelCheckpoint instead)",
                )
            return
        self.model.load_state_dict(self.best_weights)
        self.restored_epoch = self.best_epoch
        if self.params.get("verbose"):
            print(
                f"EarlyStopping: restored the weights of epoch {self.best_epoch + 1}, "
                f"the best {self.monitor} ({self.best:.6g})"
            )

    def state_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "best_epoch": self.best_epoch,
            "wait": self.wait,
            "stopped_epoch": self.stopped_epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = state.get("best")
        self.best_epoch = state.get("best_epoch")
        self.wait = state.get("wait", 0)
        self.stopped_epoch = state.get("stopped_epoch")

    def __repr__(self) -> str:
        return (
            f"EarlyStopping(monitor={self.monitor!r}, min_delta={self.min_delta}, patience={self.patience}, "
            f"mode={self.mode!r}, restore_best_weights={self.restore_best_weights})"
        )
