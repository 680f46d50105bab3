"""``ResumePoint``: the run folder's resume point after every epoch, its ``history.jsonl`` row and ``last.npz``."""

from __future__ import annotations

import math

from ..training import checkpoint as ckpt
from ..training.run_folder import RunFolder
from .base import Callback, Logs, plain


class ResumePoint(Callback):
    """Keeps what a resume of the run starts from, in the run folder (``set_run_dir``), after every epoch:

    - ``history.jsonl``: the epoch's row (``{'epoch', **logs}``); a checkpoint names this file and how many of its
      rows it covers instead of holding the history. At the first epoch's end of each ``fit`` the file is rewritten
      to the rows the trainer had before (``trainer.history_rows``: those a resume restored, or earlier fits'), so
      a resume that fails before it has trained an epoch leaves the file as it was.
    - ``checkpoints/last.npz``: ``trainer.save_checkpoint``, when the epoch's loss and the weights are finite (after
      a bad epoch the last good resume point stays).

    It runs after every other callback (``order = RESUME``), so ``last.npz`` holds their state at the epoch's end.
    ``Trainer(run_dir=...)`` adds one on the process that writes (``add_defaults``).

    >>> import tempfile, trainkit
    >>> from trainkit.trainer import Trainer
    >>> run = RunFolder(tempfile.mkdtemp())
    >>> trainer = Trainer(trainkit.nn.Linear(1, 1), run_dir=run.root, verbose=False)
    >>> _ = trainer.fit(trainkit.zeros(4, 1), trainkit.zeros(4, 1), epochs=2)
    >>> [type(c).__name__ for c in trainer.callbacks]
    ['CSVLogger', 'ModelCheckpoint', 'ResumePoint']
    >>> len(run.history.read_text().splitlines()), run.last.is_file()
    (2, True)
    """

    rank_zero_only = True

    order = Callback.RESUME

    def __init__(self) -> None:
        super().__init__()
        self.rewrite = True  # the history file still holds rows of the run before this fit

    @property
    def folder(self) -> RunFolder:
        if self.run_dir is None:
            raise ValueError("ResumePoint needs a trainer with a run_dir, to know where to write")
        return RunFolder(self.run_dir)

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self.rewrite = True
        history = self.folder.history
        if not history.is_file():  # a checkpoint written inside the first epoch names it
            ckpt.write_history(history, self.trainer.history_rows)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        folder = self.folder
        row = {"epoch": epoch, **(logs or {})}
        if self.rewrite:  # rows after the trainer's belong to epochs this fit has now trained again
            ckpt.write_history(folder.history, [*self.trainer.history_rows, row])
            self.rewrite = False
        else:
            ckpt.append_history(folder.history, row)
        loss = plain((logs or {}).get("loss", math.nan))
        if math.isfinite(loss) and ckpt.finite_weights(self.model):
            self.trainer.save_checkpoint(folder.last)
