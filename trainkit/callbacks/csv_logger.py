"""``CSVLogger``: one CSV row per epoch."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from ..serialization.files import naming
from .base import Callback, Logs


def resolve(filename: str | os.PathLike, run_dir: str | os.PathLike | None) -> Path:
    """A relative ``filename`` lives in ``run_dir`` when there is one, else in the working directory.

    >>> resolve("log.csv", "runs/a").as_posix(), resolve("log.csv", None).as_posix()
    ('runs/a/log.csv', 'log.csv')
    """
    path = Path(filename)
    if not path.is_absolute() and run_dir is not None:
        path = Path(run_dir) / path
    return path


class CSVLogger(Callback):
    """Writes each epoch's logs as a row of ``filename``: an ``epoch`` column, then the logs' keys.

    The header comes from the first epoch's keys; when a later epoch brings new keys, they are added as columns
    (the file is rewritten with the wider header, earlier rows left empty there). ``append=False`` starts a new
    file; ``append=True`` keeps the rows already there and continues them. A resumed run (``load_state_dict``)
    always continues the file, dropping rows of epochs after the checkpoint.

    A relative ``filename`` is placed in the run's ``run_dir`` (``set_run_dir``) when there is one. The ``epoch``
    column counts from 0, as the ``epoch`` the callbacks get and Keras' ``CSVLogger`` write it (the console's
    ``Epoch 1/10`` is row 0).

    Args:
        filename (str | os.PathLike, required): the CSV file; a relative one is inside the run folder.
        append (bool, default False): continue the rows already in the file instead of starting it anew.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> logger = CSVLogger(path)
    >>> logger.on_train_begin()
    >>> logger.on_epoch_end(0, {"loss": 1.0})
    >>> logger.on_epoch_end(1, {"loss": 0.5, "val_loss": 0.7})
    >>> print(path.read_text().strip())
    epoch,loss,val_loss
    0,1.0,
    1,0.5,0.7
    """

    rank_zero_only = True

    order = Callback.RECORD

    def __init__(self, filename: str | os.PathLike, append: bool = False) -> None:
        super().__init__()
        self.filename = filename
        self.append = append
        self.path: Path | None = None
        self.fieldnames: list[str] = []
        self._last_epoch: int | None = None
        self._resumed = False
        self._kept: list[dict[str, str]] | None = None  # the rows to keep, until the first epoch rewrites the file

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self.path = resolve(self.filename, self.run_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fieldnames = []
        self._kept = None
        if (self.append or self._resumed) and self.path.exists():
            header, rows = self._read()
            if self._resumed:
                # rows written after the checkpoint belong to epochs the resumed run repeats
                keep = self._last_epoch if self._last_epoch is not None else -1
                rows = [r for r in rows if _epoch_of(r) is not None and _epoch_of(r) <= keep]
            self.fieldnames = header
            # written with the first epoch's row: a resume that fails before then leaves the file as it was
            self._kept = rows
        else:
            self.path.write_text("")

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if self.path is None:
            self.on_train_begin()
        row = {"epoch": epoch, **(logs or {})}
        new = [k for k in row if k not in self.fieldnames]
        if new or self._kept is not None:
            rows = self._kept if self._kept is not None else self._read()[1] if self.fieldnames else []
            self.fieldnames = self.fieldnames + new
            self._write(self.fieldnames, rows)
            self._kept = None
        with naming(self.path), open(self.path, "a", newline="") as f:
            csv.DictWriter(f, self.fieldnames).writerow(row)
        self._last_epoch = epoch

    def _read(self) -> tuple[list[str], list[dict[str, str]]]:
        with open(self.path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            return list(reader.fieldnames or []), rows

    def _write(self, header: list[str], rows: list[dict[str, str]]) -> None:
        # write aside and rename, so an interruption never leaves a half-written log
        tmp = self.path.with_name(self.path.name + ".tmp")
        with naming(self.path), open(tmp, "w", newline="") as f:
            if header:
                writer = csv.DictWriter(f, header)
                writer.writeheader()
                writer.writerows(rows)
        os.replace(tmp, self.path)

    def state_dict(self) -> dict[str, Any]:
        return {"last_epoch": self._last_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._last_epoch = state.get("last_epoch")
        self._resumed = True

    def __repr__(self) -> str:
        return f"CSVLogger({str(self.filename)!r}, append={self.append})"


def _epoch_of(row: dict[str, str]) -> int | None:
    try:
        return int(row.get("epoch", ""))
    except ValueError:
        return None
