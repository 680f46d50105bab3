"""``History``: the epoch logs as a dict of lists."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Callback, Logs, plain


class History(Callback):
    """Records each epoch's logs, as Keras' ``History`` (what ``Trainer.fit`` returns).

    - ``history[key][i]``: ``key``'s value at the i-th recorded epoch. ``history['epoch']`` holds the epoch numbers
      too; a key that first appears at a later epoch is padded with ``None`` for the epochs before, and a key
      missing from an epoch gets ``None``, so that every list lines up.
    - ``epoch``: the recorded epochs' numbers, as a list (counting from 0, as the ``epoch`` the callbacks get and
      ``metrics.csv`` and ``history.jsonl`` write; the console's ``Epoch 1/10`` is epoch 0).
    - ``params``: the run's settings the trainer gave (``set_params``): ``epochs``, ``steps`` (batches an epoch,
      Keras' name; also as ``steps_per_epoch``) and ``verbose``.

    >>> h = History()
    >>> h.set_params({"epochs": 2, "steps_per_epoch": 10, "verbose": 0})
    >>> h.on_epoch_end(0, {"loss": 1.0})
    >>> h.on_epoch_end(1, {"loss": 0.5, "val_loss": 0.7})
    >>> h.history
    {'epoch': [0, 1], 'loss': [1.0, 0.5], 'val_loss': [None, 0.7]}
    >>> h.epoch, h.params["steps"], h.params["epochs"]
    ([0, 1], 10, 2)
    """

    order = Callback.RECORD

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[Any]] = {}
        self._epochs: list[int] | None = None  # set when the epochs are given rather than recorded

    @property
    def epoch(self) -> list[int]:
        """The numbers of the recorded epochs, in order (Keras' ``History.epoch``)."""
        if self._epochs is not None:
            return self._epochs
        if "epoch" in self.history:
            return self.history["epoch"]
        # a history filled from plain lists (key -> values) numbers its rows from 0
        return list(range(max((len(v) for v in self.history.values()), default=0)))

    @epoch.setter
    def epoch(self, epochs: list[int]) -> None:
        self._epochs = [int(e) for e in epochs]

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Keep the run's settings, the batches an epoch under Keras' name ``steps`` as well as
        ``steps_per_epoch``."""
        super().set_params(params)
        if "steps_per_epoch" in self.params:
            self.params.setdefault("steps", self.params["steps_per_epoch"])
        elif "steps" in self.params:
            self.params["steps_per_epoch"] = self.params["steps"]

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        n = len(self.history.get("epoch", []))
        row = {"epoch": epoch, **(logs or {})}
        for key in row:
            self.history.setdefault(key, [None] * n)
        for key, values in self.history.items():
            values.append(row.get(key))

    def state_dict(self) -> dict[str, Any]:
        return {"history": {k: [plain(x) for x in v] for k, v in self.history.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = {k: list(v) for k, v in state.get("history", {}).items()}

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)})"
