"""``ProgressBar``: Keras' training display. On a terminal a bar per epoch, fitted to the window, then the epoch's
complete summary, wrapped rather than cut; elsewhere (a pipe, a CI log) one plain line per epoch, never a
carriage return. ``PassProgress`` does the same for one pass of ``evaluate`` or ``predict``; ``resolve_verbose``
turns Keras' ``verbose`` (0, 1, 2, 'auto') into what the display does."""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from .base import Callback, Logs, plain
from .progress_line import LiveBar, count_text, format_duration, format_logs, format_step_time, log_fields

__all__ = [
    "VERBOSE_CHOICES",
    "PassProgress",
    "ProgressBar",
    "check_verbose",
    "format_logs",
    "is_terminal",
    "resolve_verbose",
]

VERBOSE_CHOICES = (0, 1, 2, "auto")


def check_verbose(verbose: Any) -> int | str:
    """``verbose`` checked and made one of ``VERBOSE_CHOICES``: True (the Trainer's default) is 'auto' and False
    is 0; anything else names itself in a ValueError.

    >>> check_verbose(True), check_verbose(False), check_verbose(2)
    ('auto', 0, 2)
    >>> check_verbose("yes")
    Traceback (most recent call last):
    ...
    ValueError: verbose must be 0 (silent), 1 (a progress bar), 2 (one line per epoch) or 'auto', got 'yes'
    """
    if isinstance(verbose, bool):
        return "auto" if verbose else 0
    if isinstance(verbose, str) and verbose.lower() == "auto":
        return "auto"
    if isinstance(verbose, int) and verbose in (0, 1, 2):
        return int(verbose)
    raise ValueError(
        f"verbose must be 0 (silent), 1 (a progress bar), 2 (one line per epoch) or 'auto', got {verbose!r}"
    )


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` writes to a terminal (one that shows a carriage return as a redraw).

    >>> import io
    >>> is_terminal(io.StringIO())
    False
    """
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def resolve_verbose(verbose: Any, stream: Any = None) -> int:
    """Keras' ``verbose`` as 0, 1 or 2: 'auto' (and True) is 1 when ``stream`` (stdout by default) is a
    terminal and 2 otherwise, as Keras 3's 'auto' is; False is 0.

    >>> import io
    >>> resolve_verbose("auto", io.StringIO()), resolve_verbose(1, io.StringIO()), resolve_verbose(False)
    (2, 1, 0)
    """
    verbose = check_verbose(verbose)
    if verbose == "auto":
        return 1 if is_terminal(sys.stdout if stream is None else stream) else 2
    return verbose


class ProgressBar(Callback):
    """Shows training progress as Keras does.

    On a terminal (``file``, stdout by default, is a tty, and ``params['verbose']`` is not 2): each epoch's
    header, ``Epoch 3/10``, then a bar redrawn in place, as wide as the window allows: the batches done, the
    time left in the epoch and in the whole run, and the running mean of the batch losses,
    ``  4/10 ━━━━━━━━────────────── ETA 0.6s, run 12s - loss: 0.1234 - 21ms/step``. At the epoch's end the bar
    gives way to the complete summary, wrapped over as many lines as the window needs and never cut: the epoch's
    time and time per step, every metric, the ``val_`` metrics and the learning rate.

    Anywhere else (a pipe, a file, a CI log), or with ``verbose=2``: one line per epoch and no carriage return,
    ``Epoch 3/10 - 1.2s - 12ms/step - loss: 0.1234 - val_loss: 0.2345 - lr: 0.01``.

    The bar's length is ``params['steps_per_epoch']`` (the batches of an epoch) and the epoch count
    ``params['epochs']``, when the trainer gave them (``set_params``). ``Trainer.evaluate`` and ``predict`` show
    their passes themselves (``PassProgress``); fit's validation pass shows as 'validating' on the bar.

    Args:
        file (TextIO | None, default None): the stream to write to; None: standard output.

    >>> import io
    >>> bar = ProgressBar(file=io.StringIO())
    >>> bar.on_epoch_begin(0)
    >>> bar.on_epoch_end(0, {"loss": 0.5, "val_loss": 0.625})
    >>> line = bar.file.getvalue()
    >>> line.split(" - ")[0], line.split(" - ")[-2:]
    ('Epoch 1', ['loss: 0.5', 'val_loss: 0.625\\n'])
    """

    rank_zero_only = True

    order = Callback.RECORD

    def __init__(self, file: TextIO | None = None) -> None:
        super().__init__()
        self.file = file
        self.bar: LiveBar | None = None
        self._start = self._train_end = 0.0
        self._loss_sum = 0.0
        self._batches = self._seen = 0
        self._epoch_times: list[float] = []  # each finished epoch's duration, validation included
        self._after_train: list[float] = []  # and of what followed its last batch (validation, callbacks)
        self._epoch = 0

    @property
    def stream(self) -> TextIO:
        return self.file if self.file is not None else sys.stdout

    def _is_terminal(self) -> bool:
        if self.params.get("verbose") == 2:  # Keras' verbose=2: one line per epoch, also on a terminal
            return False
        return is_terminal(self.stream)

    def _title(self, epoch: int) -> str:
        epochs = self.params.get("epochs")
        return f"Epoch {epoch + 1}/{epochs}" if epochs else f"Epoch {epoch + 1}"

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self._epoch_times, self._after_train = [], []

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        self._close()
        self._start = self._train_end = time.perf_counter()
        self._loss_sum, self._batches, self._seen = 0.0, 0, 0
        self._epoch = epoch
        if self._is_terminal():
            print(self._title(epoch), file=self.stream, flush=True)
            self.bar = LiveBar(self.stream, self.params.get("steps_per_epoch"), self._title(epoch))
            self.bar.draw(0, self._eta_text(), [], force=True)

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        self._seen += 1
        self._train_end = time.perf_counter()
        loss = plain((logs or {}).get("loss"))
        if isinstance(loss, (int, float)) and not isinstance(loss, bool):
            self._loss_sum += loss
            self._batches += 1
        bar = self.bar
        if bar is None:
            return
        bar.n = self._seen  # the summary's count, whether or not this step is drawn
        if bar.due(force=self._seen == bar.total):  # the texts only when the line is redrawn
            bar.draw(self._seen, self._eta_text(), self._running_fields(), force=True)

    def on_test_begin(self, logs: Logs | None = None) -> None:
        if self.bar is not None:  # fit's validation pass: say so while it runs
            self.bar.draw(self._seen, "validating", self._running_fields(), force=True)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        now = time.perf_counter()
        took = now - self._start
        self._epoch_times.append(took)
        self._after_train.append(now - self._train_end)
        times = [format_duration(took)]
        if self._seen:
            times.append(format_step_time((self._train_end - self._start) / self._seen))
        if self.bar is not None:
            self.bar.finish(" ".join(times), log_fields(logs))
            self.bar = None
            return
        text = format_logs(logs)
        line = " - ".join([self._title(epoch), *times])
        print(f"{line} - {text}" if text else line, file=self.stream, flush=True)

    # -------------------------------------------------------------------------------------------- estimates
    def _running_fields(self) -> list[str]:
        fields = [f"loss: {self._loss_sum / self._batches:.4g}"] if self._batches else []
        if self._seen:  # after the loss: a narrow window leaves the step time out first
            fields.append(format_step_time((self._train_end - self._start) / self._seen))
        return fields

    def _eta_text(self) -> str:
        """``'ETA 0.6s, run 12s'``: the time left in the epoch's training batches and in the whole run (the
        epochs to come take as long as the finished ones did, validation included; before any has finished, as
        long as this one's batches)."""
        total, seen = self.params.get("steps_per_epoch"), self._seen
        elapsed = self._train_end - self._start
        if not total or not seen:
            return f"ETA ?, {format_duration(elapsed)} so far" if seen else "ETA ?"
        epoch_left = elapsed / seen * (total - seen)
        text = f"ETA {format_duration(epoch_left)}"
        epochs = self.params.get("epochs")
        later = epochs - (self._epoch + 1) if epochs else 0
        if later > 0:
            done = len(self._epoch_times)
            per_epoch = sum(self._epoch_times) / done if done else elapsed / seen * total
            validation = sum(self._after_train) / done if done else 0.0  # this epoch's, still to come
            text += f", run {format_duration(epoch_left + validation + later * per_epoch)}"
        return text if math.isfinite(epoch_left) else "ETA ?"

    def _close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def on_train_end(self, logs: Logs | None = None) -> None:
        self._close()

    def on_exception(self, exc: BaseException) -> None:
        self._close()


class PassProgress:
    """The progress of one pass of ``Trainer.evaluate`` or ``Trainer.predict``, as Keras' ``evaluate`` and
    ``predict`` show it: with ``verbose`` 1 on a terminal a bar fitted to the window, then
    ``4/4 ━━━━━━━━━━━━━━━━━━━━ 0.1s 12ms/step - loss: 0.1234 - mae: 0.2`` wrapped to it; with 2, or off a
    terminal, that line alone at the end, ``4/4 - 0.1s - 12ms/step - loss: 0.1234``; with 0 nothing.

    >>> import io
    >>> shown = PassProgress(2, steps=4, stream=io.StringIO())
    >>> for step in range(1, 5):
    ...     shown.update(step)
    >>> shown.finish({"loss": 0.5})
    >>> shown.stream.getvalue().split(" - ")[0], shown.stream.getvalue().split(" - ")[-1]
    ('4/4', 'loss: 0.5\\n')
    """

    def __init__(self, verbose: Any, steps: int | None, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.verbose = resolve_verbose(verbose, self.stream)
        self.steps = steps
        self.seen = 0
        self.start = time.perf_counter()
        self.bar = LiveBar(self.stream, steps, "") if self.verbose == 1 and is_terminal(self.stream) else None
        if self.bar is not None:
            self.bar.draw(0, "ETA ?", [], force=True)

    def update(self, seen: int, fields: list[str] | None = None) -> None:
        """``seen`` batches done; ``fields`` (``'loss: 0.12'``) are shown beside the bar when they fit."""
        self.seen = seen
        bar = self.bar
        if bar is None:
            return
        bar.n = seen
        if bar.due(force=seen == self.steps):
            per_step = (time.perf_counter() - self.start) / seen
            left = f"ETA {format_duration(per_step * (self.steps - seen))}" if self.steps else "ETA ?"
            bar.draw(seen, left, [*(fields or []), format_step_time(per_step)], force=True)

    def finish(self, logs: Logs | None = None) -> None:
        """Show the pass's time, time per step and ``logs`` (the loss and metrics)."""
        if not self.verbose:
            return
        took = time.perf_counter() - self.start
        times = [format_duration(took)] + ([format_step_time(took / self.seen)] if self.seen else [])
        if self.bar is not None:
            self.bar.finish(" ".join(times), log_fields(logs))
            self.bar = None
            return
        count = count_text(self.seen, self.steps if self.steps is not None else self.seen).strip()
        print(" - ".join([count, *times, *log_fields(logs)]), file=self.stream, flush=True)

    def close(self) -> None:
        """End a pass that stopped early (an exception) with its bar on a line of its own."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
