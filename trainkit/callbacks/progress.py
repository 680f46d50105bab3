"""``ProgressBar``: a tqdm bar per epoch on a terminal, one plain line per epoch otherwise (logs, CI)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from .base import Callback, Logs, plain


def format_logs(logs: Logs | None) -> str:
    """``'loss: 0.1234 - val_loss: 0.2345'``: the scalar logs, without per-parameter keys such as 'grad_norm/...'."""
    parts = []
    for key, value in (logs or {}).items():
        value = plain(value)
        if "/" in key or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        parts.append(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    return " - ".join(parts)


class ProgressBar(Callback):
    """Shows training progress.

    When ``file`` (stdout by default) is a terminal: a tqdm bar per epoch, advancing each batch with the running
    mean of the batch losses, left on screen with the epoch's logs at epoch end. Otherwise one line per epoch,
    ``Epoch 3/10 - 1.2s - loss: 0.1234 - val_loss: 0.2345 - lr: 0.01``, which keeps log files readable.

    The bar's length is ``params['steps_per_epoch']`` (the batches of an epoch) and the epoch count
    ``params['epochs']``, when the trainer gave them (``set_params``).

    >>> import io
    >>> bar = ProgressBar(file=io.StringIO())
    >>> bar.on_epoch_begin(0)
    >>> bar.on_epoch_end(0, {"loss": 0.5, "val_loss": 0.625})
    >>> bar.file.getvalue().split(" - ")[0], bar.file.getvalue().split(" - ")[2:]
    ('Epoch 1', ['loss: 0.5', 'val_loss: 0.625\\n'])
    """

    rank_zero_only = True

    order = Callback.RECORD

    def __init__(self, file: TextIO | None = None) -> None:
        super().__init__()
        self.file = file
        self.bar: Any = None
        self._start = 0.0
        self._loss_sum = 0.0
        self._batches = 0

    @property
    def stream(self) -> TextIO:
        return self.file if self.file is not None else sys.stdout

    def _is_terminal(self) -> bool:
        if self.params.get("verbose") == 2:  # Keras' verbose=2: one line per epoch, also on a terminal
            return False
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def _title(self, epoch: int) -> str:
        epochs = self.params.get("epochs")
        return f"Epoch {epoch + 1}/{epochs}" if epochs else f"Epoch {epoch + 1}"

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        self._start = time.perf_counter()
        self._loss_sum, self._batches = 0.0, 0
        if self._is_terminal():
            from tqdm import tqdm

            total = self.params.get("steps_per_epoch")
            self.bar = tqdm(total=total, desc=self._title(epoch), file=self.stream, unit="batch", leave=True)

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        loss = plain((logs or {}).get("loss"))
        if isinstance(loss, (int, float)):
            self._loss_sum += loss
            self._batches += 1
        if self.bar is not None:
            if self._batches:
                self.bar.set_postfix(loss=f"{self._loss_sum / self._batches:.4g}", refresh=False)
            self.bar.update(1)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(format_logs(logs), refresh=False)
            self._close()
            return
        took = time.perf_counter() - self._start
        line = f"{self._title(epoch)} - {took:.1f}s"
        text = format_logs(logs)
        print(f"{line} - {text}" if text else line, file=self.stream, flush=True)

    def _close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def on_train_end(self, logs: Logs | None = None) -> None:
        self._close()

    def on_exception(self, exc: BaseException) -> None:
        self._close()
