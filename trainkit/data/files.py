"""Datasets read from files: NumPy ``.npz`` archives and CSV tables with a header row."""

from __future__ import annotations

import csv
import os
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..autograd.backend import float32, int64, to_dtype
from ..autograd.creation import from_numpy
from .dataset import TensorDataset

PathLike = str | os.PathLike


TASKS = ("classification", "regression")


def _target_dtype(task: str, dtype: Any) -> Any:
    """The targets' dtype for ``task``: int64 class indices, or ``dtype`` when it is a float one (else float32)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)} (or None: from the stored dtypes), got {task!r}")
    if task == "classification":
        return int64
    return dtype if dtype is not None and to_dtype(dtype).is_floating_point else float32


def _cast(path: PathLike, name: str, array: np.ndarray, dtype: Any) -> np.ndarray:
    """``array`` as ``dtype``; None keeps it. Integer class indices must be whole numbers, and one column of them
    becomes a vector (cross_entropy's target shape)."""
    if dtype is None:
        return array
    target = to_dtype(dtype).np
    if target.kind in "iu" and array.dtype.kind == "f":
        bad = array[array != np.round(array)]
        if bad.size:
            raise ValueError(
                f"{path}: {name!r} holds {bad.flat[0].item()!r}, not a whole number: class indices (task "
                "classification, an integer dtype) must be; for values, use task regression"
            )
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
    return array.astype(target)


def _finish(path: PathLike, arrays: dict[str, np.ndarray], dtypes: dict[str, Any]) -> TensorDataset:
    rows = {name: len(a) if a.ndim else None for name, a in arrays.items()}
    if any(r is None for r in rows.values()) or len(set(rows.values())) > 1:
        sizes = ", ".join(f"{name!r}: {r if r is not None else 'a scalar'}" for name, r in rows.items())
        raise ValueError(f"{path}: the arrays need the same number of rows ({sizes})")
    arrays = {name: _cast(path, name, a, dtypes.get(name)) for name, a in arrays.items()}
    return TensorDataset(*(from_numpy(np.ascontiguousarray(a)) for a in arrays.values()))


def _dtypes(parts: dict[str, str], arrays: dict[str, np.ndarray], dtype: Any, task: str | None) -> dict[str, Any]:
    """Each array's dtype. ``parts`` maps an array's name to 'inputs' or 'targets'; ``dtype`` is the floating
    arrays' dtype (integer ones become int64, the class indices losses take), None to keep the stored ones, or a
    dict by array name or part; ``task`` then decides the targets'."""
    out = {}
    for name, part in parts.items():
        kind = arrays[name].dtype.kind
        if isinstance(dtype, dict):
            out[name] = dtype.get(name, dtype.get(part))
        else:
            out[name] = None if dtype is None else dtype if kind == "f" else int64 if kind in "iu" else None
        if part == "targets" and task is not None:
            out[name] = _target_dtype(task, out[name])
    return out


def load_npz(
    path: PathLike, inputs: str = "x", targets: str | None = "y", dtype: Any = float32, task: str | None = None
) -> TensorDataset:
    """A ``TensorDataset(inputs, targets)`` from the arrays of that name in a ``.npz`` archive.

    Each array keeps its kind: floating arrays become ``dtype``, integer ones int64 (class indices, as
    cross_entropy takes them). ``dtype=None`` keeps the stored dtypes, and a dict gives one per array name (or per
    part, ``inputs`` / ``targets``). ``task="classification"`` makes the targets int64 class indices (whole numbers;
    one column becomes a vector), ``"regression"`` floats; ``targets=None`` gives inputs only.

    >>> import tempfile, numpy as np
    >>> path = tempfile.mkdtemp() + "/d.npz"
    >>> np.savez(path, x=np.zeros((4, 2)), y=np.array([0, 1, 1, 0]))
    >>> ds = load_npz(path)
    >>> len(ds), ds.tensors[0].dtype, ds.tensors[1].dtype
    (4, trainkit.float32, trainkit.int64)
    """
    try:
        archive = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file: {path}") from None
    except (ValueError, OSError, zipfile.BadZipFile) as err:
        raise ValueError(f"{path}: not a readable .npz archive ({err})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: holds a single array, not a .npz archive of named arrays")
    with archive:
        names = [inputs] if targets is None else [inputs, targets]
        for name in names:
            if name not in archive.files:
                raise KeyError(f"{path} has no array {name!r}; it holds {', '.join(map(repr, archive.files))}")
        arrays = {name: archive[name] for name in names}
    parts = dict(zip(names, ("inputs", "targets")))
    return _finish(path, arrays, _dtypes(parts, arrays, dtype, task))


def _column_indices(path: PathLike, header: list[str], names: Sequence[str]) -> list[int]:
    missing = [n for n in names if n not in header]
    if missing:
        raise KeyError(
            f"{path} has no column {', '.join(map(repr, missing))}; its columns are {', '.join(map(repr, header))}"
        )
    return [header.index(n) for n in names]


def _parse(path: PathLike, rows: list[list[str]], columns: list[int], header: list[str]) -> np.ndarray:
    try:
        return np.array([[float(row[c]) for c in columns] for row in rows], dtype=np.float64).reshape(-1, len(columns))
    except ValueError:
        pass
    # find the first bad cell only on failure, so the common case stays one pass
    for line, row in enumerate(rows, start=2):
        for c in columns:
            try:
                float(row[c])
            except ValueError:
                raise ValueError(f"{path}, line {line}, column {header[c]!r}: {row[c]!r} is not a number") from None
    raise AssertionError("unreachable")


def load_csv(
    path: PathLike,
    inputs: Sequence[str],
    targets: Sequence[str] | None = None,
    delimiter: str = ",",
    dtype: Any = float32,
    task: str | None = None,
) -> TensorDataset:
    """A ``TensorDataset(inputs, targets)`` from named columns of a CSV file whose first row names the columns.

    Each part has shape (rows, number of columns named); a single name may be given as a string. The cells are
    numbers, read as ``dtype`` (a dict: one per part, ``inputs`` / ``targets``). A CSV cannot say whether a label
    column holds classes or values: ``task="classification"`` (or an integer dtype for ``targets``) makes it
    int64 class indices of shape (rows,), as cross_entropy takes them; ``trainkit train`` sets it from the loss.

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
    >>> _ = path.write_text("a,b,label\\n1,2,0\\n3,4,1\\n")
    >>> x, y = load_csv(path, inputs=["a", "b"], targets=["label"]).tensors
    >>> x.shape, y.shape
    (trainkit.Size([2, 2]), trainkit.Size([2, 1]))
    >>> load_csv(path, inputs=["a", "b"], targets="label", task="classification").tensors[1]
    tensor([0, 1])
    """
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    targets = None if targets is None else [targets] if isinstance(targets, str) else list(targets)
    with open(path, newline="") as f:
        table = [row for row in csv.reader(f, delimiter=delimiter) if row]
    if not table:
        raise ValueError(f"{path}: empty file, expected a header row naming the columns")
    header, rows = [name.strip() for name in table[0]], table[1:]
    for line, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise ValueError(f"{path}, line {line}: {len(row)} fields, but the header names {len(header)}")
    parts = {"inputs": _parse(path, rows, _column_indices(path, header, inputs), header)}
    if targets is not None:
        parts["targets"] = _parse(path, rows, _column_indices(path, header, targets), header)
    # every cell was read as float64: a number dtype applies to both parts, the task then fixes the targets
    dtypes = {part: dtype.get(part) if isinstance(dtype, dict) else dtype for part in parts}
    if "targets" in parts and task is not None:
        dtypes["targets"] = _target_dtype(task, dtypes["targets"])
    return _finish(path, parts, dtypes)
