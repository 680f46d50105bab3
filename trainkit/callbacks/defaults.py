"""The callbacks every run gets unless it brings its own of the kind, from Python as from the command."""

from __future__ import annotations

from pathlib import Path

from ..training.run_folder import RunFolder
from .base import CallbackList
from .checkpoint import ModelCheckpoint
from .csv_logger import CSVLogger
from .progress import ProgressBar
from .resume_point import ResumePoint


def add_defaults(
    callbacks: CallbackList, verbose: int | bool, run_dir: Path | None, monitor: str, main: bool = True
) -> None:
    """Add what a Keras user expects and has not given: a ``ProgressBar`` when ``verbose`` (1: a bar on a
    terminal, 2: one line per epoch), and with a run folder a ``CSVLogger`` (metrics.csv), a ``ModelCheckpoint``
    of the best epoch by ``monitor`` and the ``ResumePoint`` (history.jsonl and last.npz). All of them print or
    write, so in data-parallel training only the ``main`` process gets them.

    >>> callbacks = CallbackList([])
    >>> add_defaults(callbacks, 1, Path("runs/a"), "val_loss")
    >>> [type(c).__name__ for c in callbacks]
    ['ProgressBar', 'CSVLogger', 'ModelCheckpoint', 'ResumePoint']
    """
    if not main:
        return
    kinds = {type(c) for c in callbacks}
    wanted = [(ProgressBar, {}, bool(verbose))]
    if run_dir is not None:
        wanted += [
            (CSVLogger, {"filename": RunFolder.METRICS}, True),
            (ModelCheckpoint, {"monitor": monitor, "save_last": False}, True),
            (ResumePoint, {}, True),
        ]
    for cls, kwargs, want in wanted:
        if want and not any(issubclass(k, cls) for k in kinds):
            callback = cls(**kwargs)
            callback.set_trainer(callbacks.trainer)
            callbacks.append(callback)
