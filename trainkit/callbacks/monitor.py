"""``MonitorCallback``: the base of the callbacks that keep the best value of one logged quantity.

``mode='auto'``, the default as in Keras 3, takes the direction from the quantity: lower is better for a loss and
an error, higher for accuracy and the scores, and a metric object says so itself (``Metric.higher_is_better``;
``trainkit.metrics.direction`` holds the rules).
"""

from __future__ import annotations

from typing import Any

from ..autograd.user_warnings import warn_user
from ..metrics import direction
from .base import Callback, Logs, improved, missing_key, monitored

MODES = ("auto", "min", "max")


def check_mode(mode: Any, owner: str = "") -> str:
    """``mode`` when it is one of ``MODES``, else a ValueError naming the allowed values.

    >>> check_mode("auto")
    'auto'
    >>> check_mode("maximum", "EarlyStopping")
    Traceback (most recent call last):
    ...
    ValueError: EarlyStopping: mode must be 'auto', 'min' or 'max', got 'maximum'
    """
    if not isinstance(mode, str) or mode not in MODES:
        prefix = f"{owner}: " if owner else ""
        raise ValueError(f"{prefix}mode must be 'auto', 'min' or 'max', got {mode!r}")
    return mode


class MonitorCallback(Callback):
    """Watches ``logs[monitor]`` at each epoch's end and keeps the best value (``best``) and its epoch
    (``best_epoch``); ``EarlyStopping`` and ``ModelCheckpoint`` are built on it, as on Keras' class of that name.

    ``mode='min'`` counts a lower value as better, ``'max'`` a higher one. ``'auto'`` decides when training begins
    (or at the first value, outside a Trainer): ``'min'`` for ``loss`` and the errors, ``'max'`` for accuracy-like
    quantities (``acc`` in the name, ``auc``, ``precision``, ``recall``, ``f1``, ...), and for the Trainer's metrics
    whatever their ``higher_is_better`` declares. A quantity it cannot place is taken as ``'min'`` with one
    ``UserWarning`` naming it and asking for ``mode='min'`` or ``mode='max'``. ``resolved_mode`` is the direction
    in use (None until decided).

    Args:
        monitor (str, default 'val_loss'): the key of the epoch logs to watch.
        mode (str, default 'auto'): ``'auto'``, ``'min'`` or ``'max'``: which way is better.
        min_delta (float, default 0): how much a value must beat the best by to count as better.

    >>> class Watch(MonitorCallback):
    ...     def on_epoch_end(self, epoch, logs=None):
    ...         value = self.current(logs)
    ...         if value is not None and self.is_improvement(value):
    ...             self.best, self.best_epoch = value, epoch
    >>> watch = Watch(monitor="val_accuracy")
    >>> for epoch, acc in enumerate([0.5, 0.75, 0.625]):
    ...     watch.on_epoch_end(epoch, {"val_accuracy": acc})
    >>> watch.resolved_mode, watch.best, watch.best_epoch
    ('max', 0.75, 1)
    """

    def __init__(self, monitor: str = "val_loss", mode: str = "auto", min_delta: float = 0) -> None:
        super().__init__()
        owner = type(self).__name__
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"{owner}: monitor must be the name of a logged quantity ('val_loss'), got {monitor!r}")
        self.monitor = monitor
        self.mode = check_mode(mode, owner)
        self.min_delta = abs(min_delta)
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.resolved_mode: str | None = None if mode == "auto" else mode
        self._warned_missing = False
        self._warned_direction = False

    def resolve_mode(self) -> str:
        """``'min'`` or ``'max'``: ``mode`` itself, or for ``'auto'`` the monitored quantity's direction (from its
        name and the trainer's ``metrics``); ``'min'``, with a warning once, when that cannot be told."""
        if self.mode != "auto":
            self.resolved_mode = self.mode
            return self.mode
        found = direction(self.monitor, getattr(self.trainer, "metrics", None) or ())
        if found is None:
            found = "min"
            if not self._warned_direction:
                self._warned_direction = True
                warn_user(
                    f"{type(self).__name__} cannot tell whether a lower or a higher {self.monitor!r} is better and "
                    "takes lower as better; pass mode='min' or mode='max' to say which"
                )
        self.resolved_mode = found
        return found

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self.resolve_mode()  # now, so that an unknown direction is said before the first epoch, not after it

    def current(self, logs: Logs | None, note: str = "") -> float | None:
        """The monitored value of ``logs`` as a float, or None (with a warning the first time, ``note`` after it)
        when the logs lack it."""
        value = monitored(logs, self.monitor)
        if value is None and not self._warned_missing:
            self._warned_missing = True
            warn_user(missing_key(type(self).__name__, self.monitor, logs) + note)
        return value

    def is_improvement(self, value: float) -> bool:
        """Whether ``value`` beats ``best`` by more than ``min_delta`` in the resolved direction (any number beats
        no best yet; NaN never does)."""
        mode = self.resolved_mode if self.resolved_mode is not None else self.resolve_mode()
        return improved(value, self.best, mode, self.min_delta)
