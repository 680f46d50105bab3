"""Where a run keeps its files: the layout of ``output_dir/NAME/version_N`` written down once.

Every run of a name gets a version folder of its own, as in Lightning; the plain file ``output_dir/NAME/latest``
names the newest one (a file rather than a symlink, so that it works on every system)::

    output_dir/NAME/
        latest                      the newest version folder's name
        version_N/
            config.yaml             the config the run was trained with, file paths made absolute
            vocab.json              the token ids of a text run
            classes.json            the class names of a run whose labels are names (cat, dog), by index
            samples.txt             the text TextSample sampled after each epoch
            history.jsonl           one line of logs per finished epoch
            metrics.csv             the same, as a table (CSVLogger)
            .lock                   held by the one process writing the folder
            checkpoints/
                last.npz            after every finished epoch: what a resume starts from
                best.npz            whenever the monitored value improves
                interrupted.npz     after Ctrl-C or SIGTERM, mid-epoch

Code that reads or writes one of these files asks a ``RunFolder`` for its path instead of spelling it. Every file
gets the mode the user's umask gives a new file (0644 under the usual 022, 0600 under 077), as the files of
``torch.save`` and of every other program do: ``umask 077`` before training keeps a run private.

>>> run = RunFolder("runs/regression/version_0")
>>> run.last.as_posix(), run.history.name
('runs/regression/version_0/checkpoints/last.npz', 'history.jsonl')
>>> RunFolder.of_checkpoint("runs/regression/version_0/checkpoints/best.npz").root.as_posix()
'runs/regression/version_0'
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..data.files import CLASSES_FILE
from ..data.text import VOCABULARY_FILE

__all__ = ["LATEST", "RunFolder", "latest_version", "version_folder", "version_number", "versions"]

LATEST = "latest"
_VERSION = re.compile(r"version_(\d+)$")


class RunFolder:
    """The paths of one run folder (``output_dir/NAME/version_N``); nothing is created or read on construction.

    >>> folder = RunFolder("runs/x/version_3")
    >>> folder.checkpoint("best").name, folder.config.name, folder.lock.name
    ('best.npz', 'config.yaml', '.lock')
    """

    CHECKPOINTS = "checkpoints"
    CONFIG = "config.yaml"
    HISTORY = "history.jsonl"
    METRICS = "metrics.csv"
    LOCK = ".lock"
    VOCABULARY = VOCABULARY_FILE
    CLASSES = CLASSES_FILE
    SAMPLES = "samples.txt"
    SUFFIX = ".npz"

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunFolder) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    @classmethod
    def of_checkpoint(cls, path: str | os.PathLike) -> RunFolder | None:
        """The run folder a checkpoint file belongs to (``RUN/checkpoints/x.npz``), or None for a file elsewhere."""
        path = Path(path)
        return cls(path.parent.parent) if path.parent.name == cls.CHECKPOINTS else None

    @classmethod
    def of(cls, root: str | os.PathLike | None) -> RunFolder | None:
        """The run folder at ``root``, or None when there is none (a run without ``run_dir``).

        >>> RunFolder.of(None) is None, RunFolder.of("runs/a").history.as_posix()
        (True, 'runs/a/history.jsonl')
        """
        return None if root is None else cls(root)

    @classmethod
    def checkpoint_file(cls, name: str) -> str:
        """The file name of checkpoint ``name`` in any checkpoint folder (a ``ModelCheckpoint``'s ``dirpath`` too).

        >>> RunFolder.checkpoint_file("best")
        'best.npz'
        """
        return f"{name}{cls.SUFFIX}"

    @property
    def checkpoints(self) -> Path:
        return self.root / self.CHECKPOINTS

    def checkpoint(self, name: str) -> Path:
        """``checkpoints/NAME.npz``: ``last``, ``best``, ``interrupted`` or a name of the caller's."""
        return self.checkpoints / self.checkpoint_file(name)

    @property
    def last(self) -> Path:
        return self.checkpoint("last")

    @property
    def best(self) -> Path:
        return self.checkpoint("best")

    @property
    def interrupted(self) -> Path:
        return self.checkpoint("interrupted")

    @property
    def config(self) -> Path:
        return self.root / self.CONFIG

    @property
    def history(self) -> Path:
        return self.root / self.HISTORY

    @property
    def metrics(self) -> Path:
        return self.root / self.METRICS

    @property
    def lock(self) -> Path:
        return self.root / self.LOCK

    @property
    def vocabulary(self) -> Path:
        return self.root / self.VOCABULARY

    @property
    def classes(self) -> Path:
        return self.root / self.CLASSES

    @property
    def samples(self) -> Path:
        return self.root / self.SAMPLES

    def resumable(self) -> list[Path]:
        """The checkpoints a resume may start from (``last.npz``, ``interrupted.npz``) that exist, oldest first."""
        found = [p for p in (self.last, self.interrupted) if p.is_file()]
        return sorted(found, key=lambda p: p.stat().st_mtime_ns)

    def temporaries(self) -> list[Path]:
        """Checkpoint files a writer left half-written (``checkpoints/*.tmp``)."""
        return sorted(self.checkpoints.glob("*.tmp"))


def version_number(folder: str | os.PathLike) -> int | None:
    """N of a ``version_N`` folder, None for any other name.

    >>> version_number("runs/x/version_12"), version_number("runs/x/best")
    (12, None)
    """
    match = _VERSION.match(Path(folder).name)
    return int(match.group(1)) if match else None


def version_folder(base: str | os.PathLike, number: int) -> Path:
    """``base/version_N``: the folder of version ``number`` of a run name.

    >>> version_folder("runs/x", 3).as_posix()
    'runs/x/version_3'
    """
    return Path(base) / f"version_{number}"


def versions(base: str | os.PathLike) -> list[Path]:
    """The version folders under ``base`` (``output_dir/NAME``), oldest first.

    >>> import tempfile
    >>> base = Path(tempfile.mkdtemp())
    >>> for n in (0, 2, 10):
    ...     (base / f"version_{n}").mkdir()
    >>> [p.name for p in versions(base)]
    ['version_0', 'version_2', 'version_10']
    """
    base = Path(base)
    if not base.is_dir():
        return []
    found = [(version_number(p), p) for p in base.iterdir() if p.is_dir() and version_number(p) is not None]
    return [p for _, p in sorted(found)]


def latest_version(base: str | os.PathLike) -> Path | None:
    """The newest version folder under ``base``: the one its ``latest`` file names, else the highest number."""
    base = Path(base)
    named = base / LATEST
    if named.is_file() and (base / named.read_text().strip()).is_dir():
        return base / named.read_text().strip()
    found = versions(base)
    return found[-1] if found else None
