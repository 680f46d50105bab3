"""Checkpoints: the Trainer's whole state in one file, in the format of ``trainkit.save`` (no pickle, atomic).

A checkpoint is a nested dict of states (model, optimizer, scheduler, random streams, callbacks, ...). This module
only names the operation; the archive format and its atomic writing live in :mod:`trainkit.serialization`.
"""

from __future__ import annotations

from pathlib import Path

from . import serialization


def save(state: dict, path: str | Path) -> Path:
    """Write ``state`` to ``path`` (.npz): to a temporary file first, then renamed, so a crash never leaves a
    broken checkpoint behind.

    >>> import tempfile, trainkit
    >>> p = save({"w": trainkit.ones(2), "epoch": 3}, Path(tempfile.mkdtemp()) / "c.npz")
    >>> load(p)["epoch"]
    3
    """
    serialization.save(state, path)
    return Path(path)


def load(path: str | Path) -> dict:
    """Read a checkpoint written by ``save`` (tensors come back as CPU tensors)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return serialization.load(path)
