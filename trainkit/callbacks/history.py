"""``History``: the epoch logs as a dict of lists."""

from __future__ import annotations

from typing import Any

from .base import Callback, Logs, plain


class History(Callback):
    """Records each epoch's logs: ``history[key][i]`` is ``key``'s value at the i-th recorded epoch.

    ``history['epoch']`` holds the epoch numbers. A key that first appears at a later epoch is padded with
    ``None`` for the epochs before, and a key missing from an epoch gets ``None``, so that every list lines up
    with ``history['epoch']``.

    >>> h = History()
    >>> h.on_epoch_end(0, {"loss": 1.0})
    >>> h.on_epoch_end(1, {"loss": 0.5, "val_loss": 0.7})
    >>> h.history
    {'epoch': [0, 1], 'loss': [1.0, 0.5], 'val_loss': [None, 0.7]}
    """

    order = Callback.RECORD

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[Any]] = {}

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
        return f"History(epochs={len(self.history.get('epoch', []))})"
