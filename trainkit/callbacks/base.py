"""``Callback``, the base class of every callback, and ``CallbackList``, which forwards each hook to its callbacks.

A callback reacts to the training loop through plain, Keras-style hook methods; the trainer calls them in this
order::

    on_train_begin(logs)
      on_epoch_begin(epoch, logs)
        on_train_batch_begin(batch, logs)
        on_after_backward()                  # gradients are in .grad
        on_before_optimizer_step(optimizer)
        on_train_batch_end(batch, logs)      # logs: 'loss' (float), 'step'
      on_validation_end(logs)                # logs: 'val_loss', 'val_<metric>'
      on_epoch_end(epoch, logs)              # logs: 'loss', metrics, 'val_*', 'lr'; callbacks may add keys
    on_train_end(logs)
    on_exception(exc)                        # instead, when training raises (KeyboardInterrupt included)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

Logs = dict[str, Any]


class Callback:
    """Base class: every hook is a no-op, so a subclass overrides only what it needs.

    ``self.trainer`` is set by ``set_trainer`` before training; through it a callback reads ``model``,
    ``optimizer``, ``epoch``, ``global_step``, ``run_dir`` ... and sets ``trainer.stop_training = True`` to stop.

    ``order`` sorts the callbacks for ``on_epoch_end`` only (stable, so equal orders keep the list's order):
    callbacks that add keys to the epoch logs or change the model run first (0), those that record the logs
    next (``RECORD``), and those that write checkpoints last (``CHECKPOINT``), so that a checkpoint holds every
    other callback's state after the epoch and the recorders see every key.

    In data-parallel training every rank runs the callbacks, with the same (reduced) logs, except those with
    ``rank_zero_only = True`` (those that print, write files or watch this process's own gradients), which run
    on rank 0 alone.

    >>> class PrintLoss(Callback):
    ...     def on_epoch_end(self, epoch, logs=None):
    ...         print(f"epoch {epoch}: {logs['loss']:.3f}")
    >>> PrintLoss().on_epoch_end(0, {"loss": 0.25})
    epoch 0: 0.250
    """

    RECORD = 10
    CHECKPOINT = 20
    order: int = 0
    rank_zero_only: bool = False
    trainer: Any = None  # on the class too, for subclasses whose __init__ does not call super().__init__()

    def __init__(self) -> None:
        self.trainer: Any = None

    def set_trainer(self, trainer: Any) -> None:
        self.trainer = trainer

    # ----------------------------------------------------------------------------------------------------- hooks
    def on_train_begin(self, logs: Logs | None = None) -> None:
        pass

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        pass

    def on_train_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        pass

    def on_after_backward(self) -> None:
        pass

    def on_before_optimizer_step(self, optimizer: Any) -> None:
        pass

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        pass

    def on_validation_end(self, logs: Logs | None = None) -> None:
        pass

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        pass

    def on_train_end(self, logs: Logs | None = None) -> None:
        pass

    def on_exception(self, exc: BaseException) -> None:
        pass

    # ---------------------------------------------------------------------------------------------------- resume
    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs, as plain JSON-serialisable values."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class CallbackList(Callback):
    """Forwards every hook to each callback in list order (``on_epoch_end`` by ``order``, see ``Callback``).

    >>> class Say(Callback):
    ...     def __init__(self, word):
    ...         super().__init__()
    ...         self.word = word
    ...     def on_train_begin(self, logs=None):
    ...         print(self.word)
    >>> CallbackList([Say("a"), Say("b")]).on_train_begin({})
    a
    b
    """

    def __init__(self, callbacks: Iterable[Callback] | None = None) -> None:
        super().__init__()
        self.callbacks: list[Callback] = list(callbacks or [])

    def append(self, callback: Callback) -> None:
        self.callbacks.append(callback)

    def __iter__(self) -> Iterator[Callback]:
        return iter(self.callbacks)

    def __len__(self) -> int:
        return len(self.callbacks)

    def set_trainer(self, trainer: Any) -> None:
        super().set_trainer(trainer)
        for cb in self.callbacks:
            cb.set_trainer(trainer)

    def on_train_begin(self, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_train_begin(logs)

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_epoch_begin(epoch, logs)

    def on_train_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_train_batch_begin(batch, logs)

    def on_after_backward(self) -> None:
        for cb in self.callbacks:
            cb.on_after_backward()

    def on_before_optimizer_step(self, optimizer: Any) -> None:
        for cb in self.callbacks:
            cb.on_before_optimizer_step(optimizer)

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_train_batch_end(batch, logs)

    def on_validation_end(self, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_validation_end(logs)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        for cb in sorted(self.callbacks, key=lambda c: c.order):
            cb.on_epoch_end(epoch, logs)

    def on_epoch_end_in_world(self, epoch: int, logs: Logs, world: Any) -> None:
        """``on_epoch_end`` in data-parallel training: rank 0's own callbacks that add keys to the logs (the
        gradient monitors) run first, then every rank takes rank 0's logs, then the others run, on the same logs
        everywhere."""
        ordered = sorted(self.callbacks, key=lambda c: c.order)
        first = [cb for cb in ordered if cb.rank_zero_only and cb.order == 0]
        for cb in first:
            cb.on_epoch_end(epoch, logs)
        logs.update(world.broadcast_object(logs))
        for cb in ordered:
            if cb not in first:
                cb.on_epoch_end(epoch, logs)

    def on_train_end(self, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_train_end(logs)

    def on_exception(self, exc: BaseException) -> None:
        for cb in self.callbacks:
            cb.on_exception(exc)

    def _keys(self) -> list[str]:
        """One stable key per callback: its class name, numbered from the second of a kind on (``CSVLogger#2``)."""
        seen: dict[str, int] = {}
        keys = []
        for cb in self.callbacks:
            name = type(cb).__name__
            seen[name] = seen.get(name, 0) + 1
            keys.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
        return keys

    def state_dict(self) -> dict[str, Any]:
        """Each callback's state under its key; callbacks without state are left out."""
        out = {}
        for key, cb in zip(self._keys(), self.callbacks):
            state = cb.state_dict()
            if state:
                out[key] = state
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, cb in zip(self._keys(), self.callbacks):
            if key in state:
                cb.load_state_dict(state[key])

    def __repr__(self) -> str:
        return f"CallbackList({self.callbacks!r})"


def check_mode(mode: str) -> str:
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
    return mode


def improved(current: float, best: float | None, mode: str, min_delta: float = 0.0) -> bool:
    """Whether ``current`` beats ``best`` by more than ``min_delta`` (any finite value beats no best yet)."""
    if current != current:  # NaN never improves
        return False
    if best is None:
        return True
    if mode == "min":
        return current < best - abs(min_delta)
    return current > best + abs(min_delta)


def plain(value: Any) -> Any:
    """``value`` as a plain Python value for JSON state: NumPy scalars and one-element tensors become numbers."""
    if hasattr(value, "item") and not isinstance(value, (int, float, str)):
        try:
            return value.item()
        except (ValueError, RuntimeError):
            return value
    return value


def jsonable(value: Any) -> Any:
    """``value`` with every NumPy scalar or one-element tensor inside lists and dicts made a plain number."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return plain(value)


def monitored(logs: Logs | None, key: str) -> float | None:
    """``logs[key]`` as a float, or None when the logs lack it."""
    if not logs or logs.get(key) is None:
        return None
    return float(plain(logs[key]))
