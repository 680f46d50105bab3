"""Datasets read from files: NumPy ``.npz`` archives and CSV tables with a header row.

A label column of names (``cat``, ``dog``) becomes class indices in the names' sorted order, as scikit-learn's
``LabelEncoder`` numbers them, so the same names give the same indices on every run; the dataset's ``classes``
lists the names by index (torchvision's attribute), and ``save_classes`` / ``load_classes`` keep that list in a
run folder, so that evaluation data is numbered as the training data was.
"""

from __future__ import annotations

import csv
import json
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..autograd.backend import float32, int64, to_dtype
from ..autograd.creation import from_numpy
from .dataset import Dataset, Subset, TensorDataset

PathLike = str | os.PathLike


TASKS = ("classification", "regression")
CLASSES_FILE = "classes.json"  # its name in a run folder, beside config.yaml


class MissingDataError(KeyError):
    """A column (CSV) or array (``.npz``) the file lacks; ``key`` is the argument that named it (``inputs`` or
    ``targets``), so that ``trainkit train`` names the config key ``data.inputs`` or ``data.targets``.

    >>> str(MissingDataError("targets", "d.csv has no column 'y'"))
    "d.csv has no column 'y'"
    """

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return str(self.args[0])


def _encode_labels(cells: Sequence[str], classes: Sequence[str] | None, where: Any) -> tuple[np.ndarray, list[str]]:
    """Class indices of label names (``cells``, stripped) and the names by index: ``classes`` when given, else the
    sorted distinct names. ``where(i)`` says where cell ``i`` is (file, line, column) in an error."""
    for i, cell in enumerate(cells):
        if not cell:
            raise ValueError(f"{where(i)}: no label (an empty cell); every sample needs one")
    names = sorted(set(cells)) if classes is None else [str(name) for name in classes]
    if len(set(names)) != len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise ValueError(f"classes name {twice!r} twice; each class has one index")
    index = {name: i for i, name in enumerate(names)}
    try:
        return np.array([index[cell] for cell in cells], dtype=np.int64), names
    except KeyError:
        pass
    i = next(i for i, cell in enumerate(cells) if cell not in index)  # found only on failure
    known = ", ".join(map(repr, names[:20])) + (", ..." if len(names) > 20 else "")
    raise ValueError(f"{where(i)}: label {cells[i]!r} is not one of the {len(names)} known classes ({known})")


def _with_classes(dataset: TensorDataset, names: list[str] | None) -> TensorDataset:
    if names is not None:  # torchvision's names for the same (ImageFolder, CIFAR10)
        dataset.classes = names
        dataset.class_to_idx = {name: i for i, name in enumerate(names)}
    return dataset


def classes_of(dataset: Dataset) -> list[str] | None:
    """The class names (by index) of a dataset whose labels were names (``load_csv``, ``load_npz``), or of Subsets of
    one; None when its labels were numbers.

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "pets.csv"
    >>> _ = path.write_text("w,label\\n1,dog\\n2,cat\\n")
    >>> classes_of(Subset(load_csv(path, "w", "label"), [0]))
    ['cat', 'dog']
    """
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    found = getattr(dataset, "classes", None) if isinstance(dataset, TensorDataset) else None
    return None if found is None else list(found)


def save_classes(path: PathLike, classes: Sequence[str]) -> Path:
    """Write the class names (by index) as JSON, ``{"classes": [...]}``, whole (a temporary file, then renamed);
    ``load_classes`` reads it.

    >>> import pathlib, tempfile
    >>> load_classes(save_classes(pathlib.Path(tempfile.mkdtemp()) / CLASSES_FILE, ["cat", "dog"]))
    ['cat', 'dog']
    """
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"classes": list(classes)}, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_classes(path: PathLike) -> list[str]:
    """The class names saved at ``path`` by ``save_classes``; an error naming the file when it holds none."""
    try:
        saved = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"no such classes file: {path}") from None
    except ValueError as err:
        raise ValueError(f"{path}: not a classes file ({err})") from None
    names = saved.get("classes") if isinstance(saved, dict) else None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ValueError(f'{path}: not a classes file (it needs {{"classes": [names, ...]}})')
    return names


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
    path: PathLike,
    inputs: str = "x",
    targets: str | None = "y",
    dtype: Any = float32,
    task: str | None = None,
    classes: Sequence[str] | PathLike | None = None,
) -> TensorDataset:
    """A ``TensorDataset(inputs, targets)`` from the arrays of that name in a ``.npz`` archive.

    Each array keeps its kind: floating arrays become ``dtype``, integer ones int64 (class indices, as
    cross_entropy takes them). ``dtype=None`` keeps the stored dtypes, and a dict gives one per array name (or per
    part, ``inputs`` / ``targets``). ``task="classification"`` makes the targets int64 class indices (whole numbers;
    one column becomes a vector), ``"regression"`` floats; ``targets=None`` gives inputs only. A targets array of
    strings holds class names: they become indices as ``load_csv`` makes them (``classes``).

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
        for name, part in zip(names, ("inputs", "targets")):
            if name not in archive.files:
                held = ", ".join(map(repr, archive.files))
                raise MissingDataError(part, f"{path} has no array {name!r} (the {part}); it holds {held}")
        arrays = {name: archive[name] for name in names}
    parts = dict(zip(names, ("inputs", "targets")))
    names_by_index = None
    if targets is not None and (arrays[targets].dtype.kind in "US" or classes is not None):
        labels = arrays[targets]
        if task == "regression" or labels.ndim != 1:
            what = "a vector of names" if labels.ndim != 1 else "for task classification"
            raise ValueError(f"{path}: {targets!r} holds class names ({labels.dtype}): they are {what}")
        cells = [str(v).strip() for v in labels.tolist()]
        arrays[targets], names_by_index = _encode_labels(
            cells, _class_names(classes), lambda i: f"{path}, array {targets!r}, row {i}"
        )
        task = "classification"
    return _with_classes(_finish(path, arrays, _dtypes(parts, arrays, dtype, task)), names_by_index)


def _class_names(classes: Sequence[str] | PathLike | None) -> list[str] | None:
    """``classes`` as a list of names: a list as it is, a path (str or Path ending in .json) read by
    ``load_classes``."""
    if classes is None:
        return None
    if isinstance(classes, os.PathLike) or (isinstance(classes, str) and classes.endswith(".json")):
        return load_classes(classes)
    if isinstance(classes, str):
        raise TypeError(f"classes is a list of class names (or a classes.json file), got the string {classes!r}")
    return [str(name) for name in classes]


def _column_indices(path: PathLike, header: list[str], names: Sequence[str], part: str) -> list[int]:
    missing = [n for n in names if n not in header]
    if missing:
        raise MissingDataError(
            part,
            f"{path} has no column {', '.join(map(repr, missing))} (the {part}); its columns are "
            f"{', '.join(map(repr, header))}",
        )
    return [header.index(n) for n in names]


def csv_columns(path: PathLike, delimiter: str = ",") -> list[str]:
    """The column names of a CSV file (its first row).

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
    >>> _ = path.write_text("a, b,label\\n1,2,0\\n")
    >>> csv_columns(path)
    ['a', 'b', 'label']
    """
    with open(path, newline="") as f:
        first = next((row for row in csv.reader(f, delimiter=delimiter) if row), [])
    return [name.strip() for name in first]


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
    classes: Sequence[str] | PathLike | None = None,
) -> TensorDataset:
    """A ``TensorDataset(inputs, targets)`` from named columns of a CSV file whose first row names the columns.

    Each part has shape (rows, number of columns named); a single name may be given as a string. The cells are
    numbers, read as ``dtype`` (a dict: one per part, ``inputs`` / ``targets``). A CSV cannot say whether a label
    column holds classes or values: ``task="classification"`` (or an integer dtype for ``targets``) makes it
    int64 class indices of shape (rows,), as cross_entropy takes them; ``trainkit train`` sets it from the loss.

    One target column of names (``cat``, ``dog``) holds classes: each name becomes its index in ``classes`` (the
    names by index, or a ``classes.json`` of ``save_classes``), by default in the sorted order of the file's names,
    as scikit-learn's ``LabelEncoder`` numbers them; the dataset's ``classes`` and ``class_to_idx`` say which is
    which. A name ``classes`` lacks is an error naming it, the file and the line.

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
    >>> _ = path.write_text("a,b,label\\n1,2,0\\n3,4,1\\n")
    >>> x, y = load_csv(path, inputs=["a", "b"], targets=["label"]).tensors
    >>> x.shape, y.shape
    (trainkit.Size([2, 2]), trainkit.Size([2, 1]))
    >>> load_csv(path, inputs=["a", "b"], targets="label", task="classification").tensors[1]
    tensor([0, 1])
    >>> _ = path.write_text("a,b,label\\n1,2,dog\\n3,4,cat\\n")
    >>> pets = load_csv(path, inputs=["a", "b"], targets="label")
    >>> pets.tensors[1], pets.classes
    (tensor([1, 0]), ['cat', 'dog'])
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
    parts = {"inputs": _parse(path, rows, _column_indices(path, header, inputs, "inputs"), header)}
    names = None
    if targets is not None:
        columns = _column_indices(path, header, targets, "targets")
        parts["targets"], names = _csv_targets(path, rows, columns, header, _class_names(classes), task)
    # every cell was read as float64: a number dtype applies to both parts, the task then fixes the targets
    dtypes = {part: dtype.get(part) if isinstance(dtype, dict) else dtype for part in parts}
    if names is not None:
        dtypes["targets"] = int64
    elif "targets" in parts and task is not None:
        dtypes["targets"] = _target_dtype(task, dtypes["targets"])
    return _with_classes(_finish(path, parts, dtypes), names)


def _csv_targets(
    path: PathLike, rows: list[list[str]], columns: list[int], header: list[str], classes: list | None, task: Any
) -> tuple[np.ndarray, list[str] | None]:
    """The target columns as numbers, or one column of class names as indices with the names by index."""
    if classes is None:
        try:
            return _parse(path, rows, columns, header), None
        except ValueError as err:  # a cell that is not a number: names of classes, unless they cannot be
            if task == "regression":
                raise ValueError(f"{err}; names in a label column are classes: use task classification") from None
            if len(columns) != 1:
                raise ValueError(f"{err}; class names are read from one target column") from None
    elif task == "regression" or len(columns) != 1:
        raise ValueError(f"{path}: classes name the labels of one target column, for task classification")
    column = columns[0]
    cells = [row[column].strip() for row in rows]
    return _encode_labels(cells, classes, lambda i: f"{path}, line {i + 2}, column {header[column]!r}")
