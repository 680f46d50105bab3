"""``Callback``, the base class of every callback, and ``CallbackList``, which forwards each hook to its callbacks.

The contract, as in Keras: before training the trainer hands each callback what it may use, then calls the
plain hook methods in this order::

    set_trainer(trainer)                     # once, when the Trainer is made
    set_model(model)                         # at the start of every fit
    set_run_dir(path_or_None)
    set_params(params)                       # {'epochs', 'steps_per_epoch' (None without a length), 'verbose'}
    on_train_begin(logs)
      on_epoch_begin(epoch, logs)
        on_train_batch_begin(batch, logs)
        on_after_backward()                  # gradients are in .grad
        on_before_optimizer_step(optimizer)
        on_train_batch_end(batch, logs)      # logs: what train_step returned ('loss' (float), 'step')
      on_test_begin(logs)                    # with validation data: the evaluation pass, as in Keras 3
        on_test_batch_begin(batch, logs)
        on_test_batch_end(batch, logs)       # logs: what test_step returned ('loss')
      on_test_end(logs)                      # logs: 'loss', '<metric>' over the validation data
      on_validation_end(logs)                # logs: 'val_loss', 'val_<metric>'
      on_epoch_end(epoch, logs)              # logs: 'loss', metrics, 'val_*', 'lr'; callbacks may add keys
    on_train_end(logs)
    on_exception(exc)                        # instead, when training raises (KeyboardInterrupt included)

``Trainer.evaluate`` calls the ``on_test_*`` hooks as above (fit's validation pass is such an evaluation), and
``Trainer.predict`` calls ``on_predict_begin(logs)``, then ``on_predict_batch_begin(batch, logs)`` and
``on_predict_batch_end(batch, {'outputs': ...})`` per batch, then ``on_predict_end(logs)``.

A callback reads ``self.model``, ``self.params`` and ``self.run_dir``; of the trainer itself it uses only
``trainer.stop_training`` (set it to stop), ``trainer.save_checkpoint(path)``, and the counters
``trainer.epoch`` and ``trainer.global_step`` (and ``trainer.scheduler``, to know whether it owns one;
``ResumePoint`` reads ``trainer.history_rows``, the epochs recorded before this one; the callbacks with a
``monitor`` read ``trainer.metrics``, whose ``higher_is_better`` decides ``mode='auto'``).

Epochs count from 0 wherever a callback gets or writes one (``on_epoch_end(0, ...)`` ends the first epoch, as in
Keras, and ``metrics.csv``, ``history.jsonl`` and TensorBoard's steps say 0 for it); what is printed for people
counts from 1 (``Epoch 1/10``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

Logs = dict[str, Any]


class Callback:
    """Base class: every hook is a no-op, so a subclass overrides only what it needs.

    Before training the trainer sets ``self.trainer`` (``set_trainer``), ``self.model`` (``set_model``),
    ``self.run_dir`` (``set_run_dir``: a ``Path`` or None) and ``self.params`` (``set_params``: ``epochs``,
    ``steps_per_epoch``, ``verbose``). They have class-level defaults (None, None, an empty mapping), so a subclass
    whose ``__init__`` does not call ``super().__init__()`` works too. A callback stops training with
    ``self.trainer.stop_training = True``.

    ``order`` sorts the callbacks for ``on_epoch_end`` only (stable, so equal orders keep the list's order):
    callbacks that add keys to the epoch logs or change the model run first (0), those that record the logs
    next (``RECORD``), those that write checkpoints after them (``CHECKPOINT``), and the run folder's resume
    point (its ``history.jsonl`` row and ``last.npz``) last of all (``RESUME``), so that a checkpoint holds every
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
    RESUME = 30
    order: int = 0
    rank_zero_only: bool = False
    # on the class too, for subclasses whose __init__ does not call super().__init__()
    trainer: Any = None
    model: Any = None
    params: Mapping[str, Any] = MappingProxyType({})
    run_dir: Path | None = None

    def __init__(self) -> None:
        self.trainer = None
        self.model = None
        self.params = MappingProxyType({})
        self.run_dir = None

    def set_trainer(self, trainer: Any) -> None:
        """Keep ``trainer``; a loop written by hand may call only this, so its ``model`` and ``run_dir``, when it
        has them, are taken too (the Trainer sets them again at each ``fit``)."""
        self.trainer = trainer
        if hasattr(trainer, "model"):
            self.set_model(trainer.model)
        if hasattr(trainer, "run_dir"):
            self.set_run_dir(trainer.run_dir)

    def set_model(self, model: Any) -> None:
        """The model being trained."""
        self.model = model

    def set_params(self, params: Mapping[str, Any]) -> None:
        """The run's settings: ``epochs``, ``steps_per_epoch`` (batches an epoch, None when the loader has no
        length) and ``verbose``.

        >>> cb = Callback()
        >>> cb.set_params({"epochs": 3, "steps_per_epoch": 10, "verbose": False})
        >>> cb.params["steps_per_epoch"]
        10
        """
        self.params = dict(params)

    def set_run_dir(self, run_dir: str | Path | None) -> None:
        """The run's directory (where relative files go), or None."""
        self.run_dir = None if run_dir is None else Path(run_dir)

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

    def on_test_begin(self, logs: Logs | None = None) -> None:
        """An evaluation starts: ``Trainer.evaluate``, or the validation pass of each epoch in ``fit``."""

    def on_test_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        """Evaluation batch ``batch`` (its index in the pass) is about to run through ``test_step``."""

    def on_test_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        """Evaluation batch ``batch`` is done; ``logs`` is what ``test_step`` returned (``'loss'``)."""

    def on_test_end(self, logs: Logs | None = None) -> None:
        """The evaluation is done; ``logs`` holds its figures (``'loss'`` and the metrics, without ``val_``)."""

    def on_predict_begin(self, logs: Logs | None = None) -> None:
        """``Trainer.predict`` starts."""

    def on_predict_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        """Prediction batch ``batch`` is about to run through ``predict_step``."""

    def on_predict_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        """Prediction batch ``batch`` is done; ``logs['outputs']`` is what ``predict_step`` returned."""

    def on_predict_end(self, logs: Logs | None = None) -> None:
        """``Trainer.predict`` is done."""

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
        self.trainer = trainer
        for cb in self.callbacks:
            cb.set_trainer(trainer)

    def set_model(self, model: Any) -> None:
        self.model = model
        for cb in self.callbacks:
            cb.set_model(model)

    def set_params(self, params: Mapping[str, Any]) -> None:
        self.params = dict(params)
        for cb in self.callbacks:
            cb.set_params(params)

    def set_run_dir(self, run_dir: str | Path | None) -> None:
        self.run_dir = None if run_dir is None else Path(run_dir)
        for cb in self.callbacks:
            cb.set_run_dir(run_dir)

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

    def on_test_begin(self, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_test_begin(logs)

    def on_test_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_test_batch_begin(batch, logs)

    def on_test_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_test_batch_end(batch, logs)

    def on_test_end(self, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_test_end(logs)

    def on_predict_begin(self, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_predict_begin(logs)

    def on_predict_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_predict_batch_begin(batch, logs)

    def on_predict_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_predict_batch_end(batch, logs)

    def on_predict_end(self, logs: Logs | None = None) -> None:
        for cb in self.callbacks:
            cb.on_predict_end(logs)

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


def missing_key(owner: str, key: str, logs: Logs | None) -> str:
    """The warning for a monitored key the epoch logs lack: the nearest key they have, then all of them.

    >>> missing_key("EarlyStopping", "val_acc", {"loss": 1.0, "val_loss": 1.0, "val_accuracy": 0.5})
    "EarlyStopping monitors 'val_acc', which the epoch logs lack; did you mean 'val_accuracy'? (available: loss, \
val_accuracy, val_loss)"
    """
    names = sorted(logs or {})
    near = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    hint = f"; did you mean '{near[0]}'?" if near else ""
    return f"{owner} monitors '{key}', which the epoch logs lack{hint} (available: {', '.join(names) or 'none'})"


def monitored(logs: Logs | None, key: str) -> float | None:
    """``logs[key]`` as a float, or None when the logs lack it."""
    if not logs or logs.get(key) is None:
        return None
    return float(plain(logs[key]))
