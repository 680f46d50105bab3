"""``ModelCheckpoint``: ``last.npz`` after every epoch, ``best.npz`` whenever the monitored value improves."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from .. import serialization
from ..autograd.user_warnings import warn_user
from ..training.run_folder import RunFolder
from .base import Callback, Logs, plain
from .monitor import MonitorCallback


class ModelCheckpoint(MonitorCallback):
    """Saves checkpoints through ``trainer.save_checkpoint`` (model, optimizer, scheduler, RNG and callback state,
    written atomically, so a crash mid-write leaves the previous file whole).

    - ``save_last``: ``dirpath/last.npz`` after every epoch, the point a run resumes from.
    - ``save_best``: ``dirpath/best.npz`` after each epoch whose ``monitor`` value beats the best so far (lower
      or higher as ``mode`` says; ``'auto'``, the default as in Keras, keeps the highest ``val_accuracy`` and the
      lowest ``val_loss``, see ``MonitorCallback``).

    - ``weights_format="safetensors"``: also the model's weights alone beside each, as ``best.safetensors`` and
      ``last.safetensors``, for other tools (PyTorch loads them with ``safetensors.torch.load_file``).

    ``dirpath=None`` uses the run's ``run_dir / "checkpoints"`` (``set_run_dir``). An epoch whose loss is not
    finite, or that left a parameter with a NaN or Inf, saves nothing: the last good checkpoint stays as it was.
    Checkpoints are written after the other callbacks have handled the epoch (``order``), so the callback state
    inside is that of the epoch's end. ``best_epoch`` counts from 0, as the ``epoch`` the callbacks get.

    Args:
        dirpath (str | os.PathLike | None, default None): the folder of the checkpoints; None: the run folder's
            ``checkpoints/``.
        monitor (str, default 'val_loss'): the key of the epoch logs that decides which epoch is the best.
        mode (str, default 'auto'): ``'auto'``, ``'min'`` or ``'max'``: whether a lower or a higher value is
            better; ``'auto'`` tells from the monitored name.
        save_best (bool, default True): write ``best.npz`` whenever the monitored value improves.
        save_last (bool, default True): write ``last.npz`` after every epoch.
        weights_format (str | None, default None): ``'safetensors'`` to write the weights alone beside each
            checkpoint as well; None: only the checkpoints.

    >>> import tempfile
    >>> class Trainer:
    ...     model = None
    ...     saved = []
    ...     def save_checkpoint(self, path):
    ...         self.saved.append(path.name)
    >>> ckpt = ModelCheckpoint(tempfile.mkdtemp())
    >>> ckpt.set_trainer(Trainer())
    >>> ckpt.on_train_begin()
    >>> for epoch, val_loss in enumerate([1.0, 0.8, 0.9]):
    ...     ckpt.on_epoch_end(epoch, {"loss": 1.0, "val_loss": val_loss})
    >>> ckpt.trainer.saved, ckpt.best, ckpt.best_epoch
    (['best.npz', 'last.npz', 'best.npz', 'last.npz', 'last.npz'], 0.8, 1)
    """

    rank_zero_only = True

    order = Callback.CHECKPOINT

    def __init__(
        self,
        dirpath: str | os.PathLike | None = None,
        monitor: str = "val_loss",
        mode: str = "auto",
        save_best: bool = True,
        save_last: bool = True,
        weights_format: str | None = None,
    ) -> None:
        if weights_format not in (None, "safetensors"):
            raise ValueError(f"weights_format must be None or 'safetensors', got {weights_format!r}")
        super().__init__(monitor, mode)
        self.weights_format = weights_format
        self.dirpath = dirpath
        self.save_best = save_best
        self.save_last = save_last
        self.best_path: Path | None = None
        self.last_path: Path | None = None

    @property
    def directory(self) -> Path:
        if self.dirpath is not None:
            return Path(self.dirpath)
        if self.run_dir is None:
            raise ValueError("ModelCheckpoint needs a dirpath, or a trainer with a run_dir, to know where to write")
        return RunFolder(self.run_dir).checkpoints

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.save_best:
            super().on_train_begin(logs)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if not self._healthy(epoch, logs):
            return
        if self.save_best:
            current = self.current(logs, f"; {RunFolder.checkpoint_file('best')} is not written")
            if current is not None and self.is_improvement(current):
                # update first: the checkpoint holds this callback's state, which must already know the new best
                self.best, self.best_epoch = current, epoch
                self.best_path = self.directory / RunFolder.checkpoint_file("best")
                self.trainer.save_checkpoint(self.best_path)
                self._save_weights(self.best_path)
        if self.save_last:
            self.last_path = self.directory / RunFolder.checkpoint_file("last")
            self.trainer.save_checkpoint(self.last_path)
            self._save_weights(self.last_path)

    def _save_weights(self, checkpoint: Path) -> None:
        if self.weights_format == "safetensors" and self.model is not None:
            serialization.save(dict(self.model.state_dict()), checkpoint.with_suffix(".safetensors"))

    def _healthy(self, epoch: int, logs: Logs | None) -> bool:
        """False, with a warning, when the epoch's weights must not replace a good checkpoint."""
        loss = plain((logs or {}).get("loss"))
        bad = isinstance(loss, float) and not math.isfinite(loss)
        if not bad and self.model is not None:
            bad = not all(bool(p.isfinite().all()) for p in self.model.parameters())
        if bad:
            warn_user(
                f"ModelCheckpoint: epoch {epoch + 1} ended with a non-finite loss or weights; no checkpoint written, "
                "the last good one is kept",
            )
        return not bad

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = state.get("best")
        self.best_epoch = state.get("best_epoch")

    def __repr__(self) -> str:
        return (
            f"ModelCheckpoint(dirpath={None if self.dirpath is None else str(self.dirpath)!r}, "
            f"monitor={self.monitor!r}, mode={self.mode!r}, save_best={self.save_best}, save_last={self.save_last})"
        )
