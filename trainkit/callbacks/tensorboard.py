"""``TensorBoard``: Keras' callback of that name, writing every epoch's logs as TensorBoard scalars."""

from __future__ import annotations

import os
from typing import Any

from ..utils.tensorboard import SummaryWriter
from .base import Callback, Logs, plain
from .csv_logger import resolve


class TensorBoard(Callback):
    """Writes each epoch's logs (``loss``, the metrics, ``val_*``, ``lr`` and the gradient monitors'
    ``grad_norm/...`` and ``act_grad_norm/...``) as scalars into ``log_dir`` (relative to the run folder when there
    is one), at step ``epoch``: the epoch as the callbacks get it, counting from 0 as Keras' callback of this name
    does and as ``metrics.csv`` and ``history.jsonl`` write it (the console's ``Epoch 1/10`` is step 0). With
    ``histogram_freq=N``, the histograms of the parameters at the epochs where ``epoch % N == 0`` (0, N, 2N, ...).
    Needs tensorboardX (``pip install 'trainkit[tensorboard]'``); view with ``tensorboard --logdir runs``.

    In a config: ``callbacks: [{name: TensorBoard, histogram_freq: 5}]``.

    Args:
        log_dir (str | os.PathLike, default 'tensorboard'): the folder of the event files; a relative one is
            inside the run folder.
        histogram_freq (int, default 0): write the parameters' histograms every this many epochs; 0: never.

    >>> TensorBoard(histogram_freq=2)
    TensorBoard(log_dir='tensorboard', histogram_freq=2)
    """

    rank_zero_only = True
    order = Callback.RECORD  # after the callbacks that add keys to the epoch logs

    def __init__(self, log_dir: str | os.PathLike = "tensorboard", histogram_freq: int = 0) -> None:
        super().__init__()
        if histogram_freq < 0:
            raise ValueError(f"histogram_freq must be 0 (off) or positive, got {histogram_freq}")
        self.log_dir, self.histogram_freq = log_dir, histogram_freq
        self.writer: SummaryWriter | None = None

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self.writer = SummaryWriter(str(resolve(self.log_dir, self.run_dir)))

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if self.writer is None:
            return
        for key, value in (logs or {}).items():
            value = plain(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(key, value, epoch)
        if self.histogram_freq and epoch % self.histogram_freq == 0 and self.model is not None:
            for name, p in self.model.named_parameters():
                self.writer.add_histogram(name, p, epoch)
        self.writer.flush()

    def _close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def on_train_end(self, logs: Logs | None = None) -> None:
        self._close()

    def on_exception(self, exc: BaseException) -> None:
        self._close()

    def __repr__(self) -> str:
        return f"TensorBoard(log_dir={str(self.log_dir)!r}, histogram_freq={self.histogram_freq})"

    def state_dict(self) -> dict[str, Any]:
        return {}
