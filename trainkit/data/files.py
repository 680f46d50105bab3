"""Datasets read from files: NumPy ``.npz`` archives and CSV tables with a header row."""

from __future__ import annotations

import csv
import os
import zipfile
from collections.abc import Sequence

import numpy as np

from ..autograd.backend import float32, to_dtype
from ..autograd.creation import from_numpy
from .dataset import TensorDataset

PathLike = str | os.PathLike


def _finish(path: PathLike, arrays: dict[str, np.ndarray], dtype) -> TensorDataset:
    rows = {name: len(a) if a.ndim else None for name, a in arrays.items()}
    if any(r is None for r in rows.values()) or len(set(rows.values())) > 1:
        sizes = ", ".join(f"{name!r}: {r if r is not None else 'a scalar'}" for name, r in rows.items())
        raise ValueError(f"{path}: the arrays need the same number of rows ({sizes})")
    if dtype is not None:
        arrays = {name: a.astype(to_dtype(dtype).np) for name, a in arrays.items()}
    return TensorDataset(*(from_numpy(np.ascontiguousarray(a)) for a in arrays.values()))


def load_npz(path: PathLike, inputs: str = "x", targets: str | None = "y", dtype=float32) -> TensorDataset:
    """A ``TensorDataset(inputs, targets)`` from the arrays of that name in a ``.npz`` archive.

    ``dtype`` converts both (``None`` keeps the stored dtypes); ``targets=None`` gives inputs only.

    >>> import tempfile, numpy as np
    >>> path = tempfile.mkdtemp() + "/d.npz"
    >>> np.savez(path, x=np.zeros((4, 2)), y=np.ones(4))
    >>> ds = load_npz(path)
    >>> len(ds), ds.tensors[0].dtype
    (4, trainkit.float32)
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
    return _finish(path, arrays, dtype)


def _column_indices(path: PathLike, header: list[str], names: Sequence[str]) -> list[int]:
    missing = [n for n in names if n not in header]
    if missing:
        raise KeyError(f"{path} has no column {', '.join(map(repr, missing))}; its columns are "
                       f"{', '.join(map(repr, header))}")
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


def load_csv(path: PathLike, inputs: Sequence[str], targets: Sequence[str] | None = None, delimiter: str = ",",
             dtype=float32) -> TensorDataset:
    """A ``TensorDataset(inputs, targets)`` from named columns of a CSV file whose first row names the columns.

    Each part has shape (rows, number of columns named); a single name may be given as a string.

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
    >>> _ = path.write_text("a,b,label\\n1,2,0\\n3,4,1\\n")
    >>> x, y = load_csv(path, inputs=["a", "b"], targets=["label"]).tensors
    >>> x.shape, y.shape
    (trainkit.Size([2, 2]), trainkit.Size([2, 1]))
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
    return _finish(path, parts, dtype)
