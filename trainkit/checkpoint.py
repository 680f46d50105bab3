"""Checkpoints as NumPy archives (``.npz``), without pickle, written atomically.

A checkpoint is a nested dict of states (model, optimizer, scheduler, RNG, callbacks, ...). Its tensors and arrays
are stored as arrays under their dotted path; everything else (numbers, strings, lists, dicts) goes into one JSON
document kept in the archive as a string, with a marker where each array was. Loading never unpickles anything.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from .autograd.backend import CPU, to_device
from .autograd.tensor import Tensor

_ARRAY = "__array__"
_TENSOR = "__tensor__"
_META = "__meta__"


def _split(value, path: str, arrays: list):
    """Replace each tensor/array in ``value`` by a marker holding its number in ``arrays``."""
    if isinstance(value, Tensor):
        arrays.append(np.asarray(to_device(value.detach()._data, CPU)))
        return {_TENSOR: len(arrays) - 1}
    if isinstance(value, np.ndarray):
        arrays.append(value)
        return {_ARRAY: len(arrays) - 1}
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise TypeError(f"checkpoint keys must be strings or ints, got {type(key).__name__} at {path!r}")
            out[("i:" if isinstance(key, int) else "s:") + str(key)] = _split(item, f"{path}/{key}", arrays)
        return out
    if isinstance(value, (list, tuple)):
        return [_split(item, f"{path}/{i}", arrays) for i, item in enumerate(value)]
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot store a {type(value).__name__} in a checkpoint (at {path!r})")


def _join(value, arrays):
    if isinstance(value, dict):
        if _TENSOR in value:
            return Tensor._make(np.array(arrays[f"a{value[_TENSOR]}"]))
        if _ARRAY in value:
            return np.array(arrays[f"a{value[_ARRAY]}"])
        return {(int(k[2:]) if k.startswith("i:") else k[2:]): _join(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_join(v, arrays) for v in value]
    return value


def save(state: dict, path: str | Path) -> Path:
    """Write ``state`` to ``path`` (.npz): to a temporary file first, then renamed, so a crash never leaves a
    broken checkpoint behind.

    >>> import tempfile, trainkit
    >>> p = save({"w": trainkit.ones(2), "epoch": 3}, Path(tempfile.mkdtemp()) / "c.npz")
    >>> load(p)["epoch"]
    3
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: list = []
    meta = _split(state, "", arrays)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **{_META: np.array(json.dumps(meta))}, **{f"a{i}": a for i, a in enumerate(arrays)})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: str | Path) -> dict:
    """Read a checkpoint written by ``save`` (tensors come back as CPU tensors)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    with np.load(path, allow_pickle=False) as archive:
        if _META not in archive.files:
            raise ValueError(f"{path} is not a trainkit checkpoint (no {_META} entry)")
        meta = json.loads(str(archive[_META]))
        arrays = {name: archive[name] for name in archive.files if name != _META}
    return _join(meta, arrays)
