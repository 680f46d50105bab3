"""``TerminateOnNaN``: stop at the first batch whose loss is NaN or infinite."""

from __future__ import annotations

import math

from ..autograd.user_warnings import warn_user
from .base import Callback, Logs, plain


class TerminateOnNaN(Callback):
    """Sets ``trainer.stop_training`` at the first non-finite batch loss and warns with the step where it happened.

    It writes nothing itself; ``ModelCheckpoint`` refuses to save an epoch with a non-finite loss or weights, so
    the last good checkpoint stays the one to resume from. ``stopped_step`` and ``stopped_epoch`` say where it
    stopped (None when it did not); ``stopped_epoch`` counts from 0, as the ``epoch`` the callbacks get, while the
    warning counts epochs and batches from 1, as the console does.

    >>> class Trainer:
    ...     stop_training, epoch, global_step = False, 0, 7
    >>> guard = TerminateOnNaN()
    >>> guard.set_trainer(Trainer())
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     guard.on_train_batch_end(3, {"loss": float("nan"), "step": 7})
    >>> guard.trainer.stop_training, str(caught[0].message)
    (True, 'TerminateOnNaN: loss is nan at step 7 (epoch 1, batch 4); stopping training')
    """

    def __init__(self) -> None:
        super().__init__()
        self.stopped_step: int | None = None
        self.stopped_epoch: int | None = None

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        loss = plain((logs or {}).get("loss"))
        if loss is None or math.isfinite(loss) or self.stopped_step is not None:
            return
        logs = logs or {}
        step = logs["step"] if "step" in logs else self.trainer.global_step
        self.stopped_step = step
        self.stopped_epoch = self.trainer.epoch
        self.trainer.stop_training = True
        warn_user(  # epoch and batch counted from 1, as the console's "Epoch 1/10" counts them
            f"TerminateOnNaN: loss is {loss} at step {step} (epoch {self.stopped_epoch + 1}, batch {batch + 1}); "
            "stopping training",
            RuntimeWarning,
        )
