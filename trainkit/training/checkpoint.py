"""Checkpoints: the Trainer's whole state in one file, in the format of ``trainkit.save`` (no pickle, atomic).

A checkpoint is a nested dict of states (model, optimizer, scheduler, random streams, callbacks, ...). This module
only names the operation; the archive format and its atomic writing live in :mod:`trainkit.serialization`.
The epochs' logs are not in it: they are appended, one line per epoch, to ``history.jsonl`` in the run folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .. import serialization
from ..autograd.random import default_generator
from ..autograd.tensor import Tensor
from ..callbacks.base import jsonable
from ..serialization.files import naming
from .run_folder import RunFolder


def finite_weights(model: Any) -> bool:
    """Whether every parameter of ``model`` is finite: a checkpoint is never written over with NaN or inf weights.

    >>> import trainkit
    >>> finite_weights(trainkit.nn.Linear(1, 1))
    True
    """
    return all(bool(p.isfinite().all()) for p in model.parameters())


class CheckpointError(ValueError):
    """A file or run folder given as a checkpoint that cannot be used as one (not a checkpoint, another optimizer's,
    a damaged history, nothing left to train); the message names the file. The command reports it as an error in
    what the user gave it (exit 2)."""


def save(state: dict, path: str | Path) -> Path:
    """Write ``state`` to ``path`` (.npz): to a temporary file first, then renamed, so a crash never leaves a
    broken checkpoint behind. The file's mode follows the umask, as every other file of a run folder's does (and as
    ``torch.save``'s files do): 0644 under the usual umask 022, 0600 under 077.

    >>> import tempfile, trainkit
    >>> from trainkit.serialization.files import creation_mode
    >>> p = save({"w": trainkit.ones(2), "epoch": 3}, Path(tempfile.mkdtemp()) / "c.npz")
    >>> load(p)["epoch"], p.stat().st_mode & 0o777 == creation_mode()
    (3, True)
    """
    serialization.save(state, path)
    return Path(path)


def load(path: str | Path, model: Any = None) -> dict:
    """Read a checkpoint written by ``save`` (tensors come back as CPU tensors); with ``model``, the shapes of its
    state are checked against the file's headers before any data is read."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    expect = None if model is None else {("model", k): tuple(v.shape) for k, v in model.state_dict().items()}
    return serialization.load(path, _expect=expect)


# The keys under which PyTorch code commonly nests a state dict beside other entries (epoch, optimizer state).
_NESTED_WEIGHTS = ("state_dict", "model_state_dict")
WEIGHTS_FILES = "a training checkpoint (RUN/checkpoints/*.npz) or a state dict (.npz, .pt/.pth, .safetensors)"


def _is_state_dict(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and bool(obj)
        and all(isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())
    )


def _held(obj: Any) -> str:
    if not isinstance(obj, dict):
        return f"a {type(obj).__name__}"
    keys = list(obj)
    return "keys " + ", ".join(map(repr, keys[:4])) + (", ..." if len(keys) > 4 else "") if keys else "an empty dict"


def model_weights(state: Any, path: str | Path) -> dict:
    """The model's state dict in what a file held: a training checkpoint's ``model`` entry, a state dict itself (what
    ``trainkit.save(model.state_dict(), ...)`` or ``torch.save`` wrote), or one nested under ``state_dict`` /
    ``model_state_dict``; else a one-line ``CheckpointError`` naming the file and what it holds.

    >>> import trainkit
    >>> weights = trainkit.nn.Linear(1, 1).state_dict()
    >>> list(model_weights({"model": weights, "optimizer": {}}, "c.npz")) == list(model_weights(weights, "w.pt"))
    True
    >>> model_weights({"lr": 0.1}, "x.npz")
    Traceback (most recent call last):
    ...
    trainkit.training.checkpoint.CheckpointError: x.npz: neither a training checkpoint (RUN/checkpoints/*.npz) \
nor a state dict (.npz, .pt/.pth, .safetensors) of tensors by name; it holds keys 'lr'
    """
    if isinstance(state, dict) and "model" in state and "optimizer" in state and isinstance(state["model"], dict):
        return state["model"]
    if _is_state_dict(state):
        return state
    for key in _NESTED_WEIGHTS:
        if isinstance(state, dict) and _is_state_dict(state.get(key)):
            return state[key]
    raise CheckpointError(
        f"{path}: neither {WEIGHTS_FILES.replace(' or ', ' nor ')} of tensors by name; it holds {_held(state)}"
    )


def load_weights(model: Any, path: str | Path, device: Any = None) -> str:
    """Put the weights a file at ``path`` holds into ``model`` (``model_weights``: a training checkpoint or a weights
    file), on ``device`` when given; returns ``"checkpoint"`` or ``"weights"``. Every error is one line naming the
    file: one that is neither, one whose weights do not fit the model.

    >>> import tempfile, trainkit
    >>> model = trainkit.nn.Linear(2, 1)
    >>> path = Path(tempfile.mkdtemp()) / "w.pt"
    >>> trainkit.save(model.state_dict(), path)
    >>> load_weights(trainkit.nn.Linear(2, 1), path)
    'weights'
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    expect = {}
    for key, value in model.state_dict().items():  # shapes checked from the headers, before the data is read
        expect[("model", key)] = expect[(key,)] = tuple(value.shape)
    try:
        state = serialization.load(path, _expect=expect)
    except (ValueError, OSError) as err:  # FileFormatError, a torch file refused: say what the file should be
        text = str(err).removeprefix(f"{path}: ")
        raise CheckpointError(f"{path}: not {WEIGHTS_FILES}: {text}") from None
    weights = model_weights(state, path)
    kind = "checkpoint" if weights is not state and "optimizer" in state else "weights"
    try:
        model.load_state_dict({k: v.to(device) if device is not None else v for k, v in weights.items()})
    except (RuntimeError, KeyError, ValueError) as err:  # missing, unexpected or misshapen: on one line
        problems = "; ".join(line.strip() for line in str(err).splitlines()[1:] if line.strip()) or str(err)
        raise CheckpointError(f"{path}: its weights do not fit the config's model: {problems}") from None
    return kind


# ------------------------------------------------------------------------------------------------------ history
# A checkpoint holds state only. The epochs' logs grow with the run, so they live in an append-only file of the run
# folder, one JSON line per epoch; a checkpoint names that file and how many of its lines it covers.
HISTORY_FILE = RunFolder.HISTORY


def history_of(rows: list[dict]) -> dict[str, list]:
    """The per-key lists (``Trainer.history``) of epoch rows; a key absent from a row adds nothing for it.

    >>> history_of([{"epoch": 0, "loss": 1.0}, {"epoch": 1, "loss": 0.5, "val_loss": 0.7}])
    {'loss': [1.0, 0.5], 'val_loss': [0.7]}
    """
    history: dict[str, list] = {}
    for row in rows:
        for key, value in row.items():
            if key != "epoch":
                history.setdefault(key, []).append(value)
    return history


def _line(row: dict) -> str:
    return json.dumps(jsonable(row), allow_nan=True) + "\n"


def write_history(path: str | Path, rows: list[dict]) -> Path:
    """Replace the history file at ``path`` with ``rows`` (atomically: a resume truncates it to its checkpoint).

    >>> import tempfile
    >>> p = write_history(Path(tempfile.mkdtemp()) / HISTORY_FILE, [{"epoch": 0, "loss": 1.0}])
    >>> append_history(p, {"epoch": 1, "loss": 0.5})
    >>> read_history(p, 2)
    [{'epoch': 0, 'loss': 1.0}, {'epoch': 1, 'loss': 0.5}]
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with naming(path):  # a full disk's error names the file
        tmp.write_text("".join(_line(row) for row in rows))
        os.replace(tmp, path)
    return path


def append_history(path: str | Path, row: dict) -> None:
    """Add one epoch's row to the history file: a constant cost per epoch, however long the run."""
    with naming(path), open(path, "a") as f:
        f.write(_line(row))


def read_history(path: str | Path, epochs: int) -> list[dict]:
    """The first ``epochs`` rows of the history file at ``path`` (rows after them belong to epochs a resume
    repeats); a ``CheckpointError`` says what is missing or damaged."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no history file at {path} (the run's per-epoch logs, which a resume needs)")
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if len(rows) == epochs:
                break
            if line.strip():
                rows.append(_row(line, path, number))
    if len(rows) < epochs:
        raise CheckpointError(f"{path} holds {len(rows)} epoch(s), but the checkpoint covers {epochs}")
    return rows


def _row(line: str, path: Path, number: int) -> dict:
    """One line of a history file: a JSON object of an epoch's logs, numbers only; else a ``ValueError`` naming the
    file and the line."""
    try:
        row = json.loads(line)
    except ValueError as err:
        raise CheckpointError(f"{path}:{number}: not a JSON line ({err}); the file is damaged") from None
    if not isinstance(row, dict):
        raise CheckpointError(
            f"{path}:{number}: a line holds one epoch's logs as a JSON object, not {type(row).__name__}"
        )
    for key, value in row.items():
        if isinstance(value, (str, list, dict)):
            raise CheckpointError(f"{path}:{number}: {key!r} is {value!r}; an epoch's logs are numbers")
    return row


def history_rows(saved: Any, checkpoint_path: str | Path) -> list[dict]:
    """The epoch rows a checkpoint's ``history`` entry stands for: ``{"file", "epochs"}`` (read from the
    ``history.jsonl`` of the run folder holding the checkpoint, else from the file it names),
    ``{"rows"}`` inline, or the per-key lists of older checkpoints."""
    if not saved:
        return []
    if "file" in saved:
        file, epochs = Path(saved["file"]), int(saved["epochs"])
        # A checkpoint in a run folder reads that folder's own history, wherever the folder was copied or moved to;
        # the absolute name it recorded serves a checkpoint file taken out of its run folder.
        folder = RunFolder.of_checkpoint(Path(checkpoint_path).resolve())
        if folder is not None and folder.history.is_file():
            file = folder.history
        return read_history(file, epochs)
    if "rows" in saved:
        return [dict(row) for row in saved["rows"]]
    n = len(saved.get("loss", []))  # older checkpoints: per-key lists, keys logged every epoch line up
    return [{k: v[i] for k, v in saved.items() if len(v) == n} for i in range(n)]


# ------------------------------------------------------------------------------------------------ trainer state
def trainer_state(trainer: Any) -> dict:
    """A Trainer's whole state (``Trainer.state_dict``). Its history is named, not held: the run folder's history
    file and how many of its epochs this state covers (without a run folder, the rows themselves, inline)."""
    rows = trainer.history_rows
    pending = trainer.pending_logs  # an epoch whose end the callbacks are handling: the checkpoint includes it
    if trainer.run_dir is not None:
        file = RunFolder(trainer.run_dir).history.resolve()
        history = {"file": str(file), "epochs": len(rows) + (pending is not None)}
    else:
        history = {"rows": rows + ([{"epoch": trainer.epoch, **pending}] if pending is not None else [])}
    return {
        "model": dict(trainer.model.state_dict()),
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": None if trainer.scheduler is None else trainer.scheduler.state_dict(),
        "rng": {
            "global": default_generator.get_state(),
            "loader": trainer.loader_generator.get_state(),
            "ranks": trainer.distribute_strategy.rng_states(),
        },
        "world_size": trainer.world_size,
        "callbacks": trainer.callbacks.state_dict(),
        "epoch": trainer.epoch,
        "epochs_done": trainer.epochs_done,
        "global_step": trainer.global_step,
        "history": history,
    }


def restore(trainer: Any, state: dict, path: str | Path, resume: bool = False) -> None:
    """Put ``state`` (from ``trainer_state``, read from ``path``) back into ``trainer``; with ``resume``, the
    process count must be the one that wrote it, since each process takes back its own random stream."""
    missing = [
        k
        for k in ("model", "optimizer", "rng", "global_step", "epoch")
        if not isinstance(state, dict) or k not in state
    ]
    if missing:
        held = (
            ", ".join(map(repr, list(state)[:4])) + (", ..." if len(state) > 4 else "")
            if isinstance(state, dict)
            else type(state).__name__
        )
        raise CheckpointError(
            f"{path}: not a training checkpoint (no {missing[0]!r}; it holds {held}); a weights file loads with "
            "model.load_state_dict(trainkit.load(path)), and a run resumes or is evaluated from RUN/checkpoints/*.npz"
        )
    saved_size = int(state.get("world_size", 1))
    if resume and saved_size != trainer.world_size:
        raise RuntimeError(
            f"{path}: written by a run of {saved_size} process(es); resume it with the same "
            f"number (this run has {trainer.world_size})"
        )
    trainer.model.load_state_dict({k: v.to(trainer.device) for k, v in state["model"].items()})
    _load_optimizer(trainer.optimizer, state["optimizer"], path)
    if trainer.scheduler is not None and state.get("scheduler") is not None:
        trainer.scheduler.load_state_dict(state["scheduler"])
    ranks = state["rng"].get("ranks")
    same_world = saved_size == trainer.world_size and ranks and len(ranks) == trainer.world_size
    default_generator.set_state(ranks[trainer.rank] if same_world else state["rng"]["global"])
    if same_world:
        trainer.distribute_strategy.set_rng_states(ranks)
    trainer.loader_generator.set_state(state["rng"]["loader"])
    trainer.callbacks.load_state_dict(state.get("callbacks", []))
    trainer.global_step = int(state["global_step"])
    trainer.history_rows = history_rows(state.get("history"), path)
    trainer.history = history_of(trainer.history_rows)
    trainer.epoch = int(state["epoch"])
    trainer.epochs_done = int(state.get("epochs_done", trainer.epoch + 1))  # older checkpoints: written at epoch end


def _load_optimizer(optimizer: Any, saved: Any, path: str | Path) -> None:
    """``optimizer.load_state_dict(saved)``, refusing the state of another kind of optimizer, whose settings
    (``betas``, ``momentum``, ...) this one would only miss at its first step."""
    name = type(optimizer).__name__
    wanted = {key for group in optimizer.param_groups for key in group if key != "params"}
    groups = saved.get("param_groups") if isinstance(saved, dict) else None
    found = {key for group in groups for key in group} if isinstance(groups, list) and groups else set()
    try:
        if wanted - found:
            raise KeyError(", ".join(sorted(wanted - found)))
        optimizer.load_state_dict(saved)
    except (KeyError, ValueError, TypeError) as err:
        raise CheckpointError(
            f"{path}: its optimizer state does not fit this run's {name} (missing {err}); resume with the "
            "optimizer it was trained with"
        ) from None


def resume_point(path: str | Path, done: int, epochs: int, epoch: int) -> str:
    """The line a resume prints, or a ``CheckpointError`` when ``epochs`` (counting those done) leaves nothing to do.

    >>> resume_point("last.npz", 3, 5, 2)
    'resuming from epoch 4 of 5: 3 done, from last.npz'
    >>> resume_point("last.npz", 5, 5, 4)
    Traceback (most recent call last):
    ...
    trainkit.training.checkpoint.CheckpointError: last.npz: the run has done 5 epoch(s) already, and epochs=5 \
counts those; to train more, ask for more epochs (e.g. fit(..., epochs=10), or from the command --set \
trainer.epochs=10)
    """
    if epochs <= done:
        raise CheckpointError(
            f"{path}: the run has done {done} epoch(s) already, and epochs={epochs} counts those; "
            f"to train more, ask for more epochs (e.g. fit(..., epochs={done + epochs}), or from "
            f"the command --set trainer.epochs={done + epochs})"
        )
    again = f" (written inside epoch {done + 1}, which starts over)" if done == epoch else ""
    return f"resuming from epoch {done + 1} of {epochs}: {done} done, from {path}{again}"
