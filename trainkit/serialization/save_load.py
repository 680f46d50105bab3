"""``save`` and ``load`` as ``torch.save`` / ``torch.load``, in three formats chosen by the name.

- ``.pt`` / ``.pth`` names and file objects: PyTorch's zip format (``torch_writer``, ``torch_pickle``), any
  picklable object, read by ``torch.load`` and written by ``torch.save`` alike. ``load`` runs no pickled code
  unless told ``weights_only=False``.
- ``.safetensors``: a flat state dict (``safetensors_format``).
- other names (``.npz``): trainkit's own archive (also used by :mod:`trainkit.training.checkpoint`): arrays in a
  ``.npz`` plus one JSON document for the structure, written atomically; it holds tensors, NumPy arrays, numbers,
  strings, ``None`` and bools in dicts, lists and tuples, and can never run code.

>>> import io, trainkit
>>> buffer = io.BytesIO()
>>> save({"w": trainkit.ones(2), "step": (3, "adam")}, buffer)
>>> _ = buffer.seek(0)
>>> load(buffer)
{'w': tensor([1., 1.]), 'step': (3, 'adam')}
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import zipfile
import zlib
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..autograd.backend import BFLOAT16_NP, CPU, to_device
from ..autograd.tensor import Tensor
from ..autograd.user_warnings import warn_user
from ..layers.parameter import Parameter
from .files import MAX_EXPANSION, MAX_STRUCTURE_BYTES, FileFormatError, creation_mode, naming, temporary_beside
from .locations import placement
from .safetensors_format import read_safetensors
from .torch_pickle import load_torch_file
from .torch_writer import save_torch_file

__all__ = ["DEFAULT_PROTOCOL", "FileFormatError", "load", "save"]

DEFAULT_PROTOCOL = 2  # the pickle protocol torch.save writes by default

# Markers in the JSON document where a value is not plain JSON.
_META = "__meta__"  # the archive entry holding the JSON document
_ARRAY = "__array__"
_TENSOR = "__tensor__"
_TUPLE = "__tuple__"
_ORDERED = "__ordered__"


def _where(path: str) -> str:
    return path or "the top level"


def _encode(value, path: str, arrays: list):
    """``value`` as JSON-ready data, its arrays appended to ``arrays`` and replaced by markers."""
    if isinstance(value, Tensor):
        array = np.asarray(to_device(value.detach()._data, CPU))
        bits = array.dtype == BFLOAT16_NP  # NumPy's .npy header cannot name bfloat16: its bits are stored
        arrays.append(array.view(np.uint16) if bits else array)
        out = {_TENSOR: len(arrays) - 1}
        if bits:
            out["bfloat16"] = True
        if value.requires_grad and value.is_leaf:
            out["requires_grad"] = True
        if _is_parameter(value):
            out["parameter"] = True
        return out
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"cannot save a NumPy array of Python objects (at {_where(path)}): it needs pickle")
        arrays.append(value)
        return {_ARRAY: len(arrays) - 1}
    if isinstance(value, dict):
        items = {}
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(
                    f"cannot save a dict key of type {type(key).__name__} ({key!r} at {_where(path)}): "
                    "keys must be strings or ints"
                )
            items[("i:" if isinstance(key, int) else "s:") + str(key)] = _encode(item, f"{path}[{key!r}]", arrays)
        return {_ORDERED: items} if isinstance(value, OrderedDict) else items
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {_TUPLE: [_encode(item, f"{path}[{i}]", arrays) for i, item in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(item, f"{path}[{i}]", arrays) for i, item in enumerate(value)]
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    hint = (
        "save model.state_dict() instead, and load it with model.load_state_dict(trainkit.load(path))"
        if hasattr(value, "state_dict")
        else "save its state as tensors, arrays, numbers and strings in dicts and lists instead (for a model: "
        "save model.state_dict())"
    )
    raise TypeError(
        f"cannot save an object of type {kind} (at {_where(path)}) in trainkit's .npz format: {hint}; or choose a "
        ".pt name, whose pickle holds any object"
    )


def _is_parameter(t: Tensor) -> bool:
    return isinstance(t, Parameter)


def _decode(value, arrays, dev):
    if isinstance(value, dict):
        if _TENSOR in value:
            array = arrays[f"a{value[_TENSOR]}"]
            t = Tensor._make(array.view(BFLOAT16_NP) if value.get("bfloat16") else array)  # fresh: no copy needed
            if dev is not None and dev != CPU:
                t = t.to(dev)
            if value.get("parameter"):
                return Parameter(t, requires_grad=bool(value.get("requires_grad", False)))
            if value.get("requires_grad"):
                t.requires_grad_(True)
            return t
        if _ARRAY in value:
            return arrays[f"a{value[_ARRAY]}"]
        if _TUPLE in value:
            return tuple(_decode(v, arrays, dev) for v in value[_TUPLE])
        if _ORDERED in value:
            return OrderedDict(_decode_items(value[_ORDERED], arrays, dev))
        return dict(_decode_items(value, arrays, dev))
    if isinstance(value, list):
        return [_decode(v, arrays, dev) for v in value]
    return value


def _decode_items(items: dict, arrays, dev):
    for k, v in items.items():
        yield (int(k[2:]) if k.startswith("i:") else k[2:]), _decode(v, arrays, dev)


def _write(f, meta, arrays) -> None:
    np.savez(f, **{_META: np.array(json.dumps(meta))}, **{f"a{i}": a for i, a in enumerate(arrays)})


def save(obj, f, pickle_module=None, pickle_protocol: int = DEFAULT_PROTOCOL) -> None:
    """Save ``obj`` to ``f``, a path (written atomically: to a temporary file first, then renamed) or a binary file
    object, as ``torch.save`` does.

    A file object, or a path ending in ``.pt`` or ``.pth``, gets PyTorch's zip format: any picklable object (a whole
    model, an optimizer's state dict, dataclasses, NumPy arrays), tensors stored as torch stores them, so that
    ``torch.load`` reads a state dict saved here (a whole trainkit model loads back in trainkit, with
    ``weights_only=False``). ``.safetensors`` gets the safetensors format (a flat state dict; needs the
    ``safetensors`` package); other names trainkit's own archive (tensors, NumPy arrays, numbers and strings in
    dicts, lists and tuples). Tensors are saved with their values and dtype (from any device), and whether a leaf
    requires grad.

    >>> import tempfile, trainkit
    >>> model = trainkit.nn.Linear(3, 2)
    >>> path = Path(tempfile.mkdtemp()) / "model.pt"
    >>> save(model.state_dict(), path)
    >>> model.load_state_dict(load(path))
    IncompatibleKeys(missing_keys=[], unexpected_keys=[])
    >>> save(model, path)
    >>> type(load(path, weights_only=False)).__name__
    'Linear'
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("trainkit.save pickles with its own pickler (torch's names for tensors): omit pickle_module")
    if hasattr(f, "write"):
        save_torch_file(obj, f, pickle_protocol)
        return
    with naming(f):  # a full disk's error names the file
        _save_to(Path(f), obj, pickle_protocol)


def _save_to(path: Path, obj, protocol: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".safetensors":
        _save_safetensors(obj, path)
        return
    if path.suffix.lower() in (".pt", ".pth"):  # PyTorch's suffix: PyTorch's format, which torch.load reads
        save_torch_file(obj, path, protocol)
        return
    arrays: list = []
    meta = _encode(obj, "", arrays)  # checks that obj holds only what the archive may hold, naming the culprit
    tmp = temporary_beside(path)  # made by open(): the umask gives its mode, as torch.save's files get theirs
    try:
        with open(tmp, "wb") as out:
            _write(out, meta, arrays)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


SAFETENSORS_HINT = (
    "safetensors files need the safetensors package, an optional extra: "
    "pip install 'trainkit[safetensors]' (or pip install safetensors)"
)


def _safetensors_numpy():
    try:
        return importlib.import_module("safetensors.numpy")
    except ImportError:
        raise ImportError(SAFETENSORS_HINT) from None


def _save_safetensors(obj, path: Path) -> None:
    """A flat dict of names to tensors (a state dict), written with the safetensors package's NumPy API."""
    if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items()):
        raise TypeError(
            f"{path}: a .safetensors file holds a flat dict of names to tensors (a state dict); save "
            "other objects under a .pt or .npz name"
        )
    arrays = {
        k: np.ascontiguousarray(v.detach().cpu().numpy()) if v.ndim else v.detach().cpu().numpy().copy()
        for k, v in obj.items()
    }
    tmp = temporary_beside(path)
    try:
        _safetensors_numpy().save_file(arrays, str(tmp))
        os.chmod(tmp, creation_mode())  # the package writes 0600; a saved file follows the umask like the others
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _load_safetensors(path: Path) -> OrderedDict:
    arrays, _ = read_safetensors(path)
    return OrderedDict((name, Tensor._make(array)) for name, array in arrays.items())


def load(
    f,
    map_location=None,
    pickle_module=None,
    *,
    weights_only: bool | None = None,
    mmap: bool | None = None,
    _expect: dict | None = None,
    **pickle_load_args,
):
    """Load what ``save`` or ``torch.save`` wrote to ``f``, a path or a binary file object, as ``torch.load`` does.

    ``weights_only=True`` (the default, as torch's since 2.6) reads tensors, containers, numbers, strings and
    torch's own safe types, plus the classes and functions ``trainkit.serialization.add_safe_globals`` trusts;
    anything else is refused in torch's words, naming the global, before anything in the file runs.
    ``weights_only=False`` unpickles whatever the file holds (a whole model): only for files you trust. As in torch,
    the environment can change the default: ``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1`` forces ``True`` whatever the call
    says, ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` makes a call that does not pass ``weights_only`` load with
    ``False`` (with a warning). Names under
    ``torch.`` in a file torch saved are looked up under ``trainkit.``. Tensors come back as trainkit Tensors where
    they were saved from (a GPU's on that GPU when one answers, else on the CPU), or where ``map_location`` sends
    them: a device or a string (``"cpu"``, ``"cuda:0"``), a dict of saved locations (``{"cuda:0": "cpu"}``) or a
    callable ``(storage, location)``. ``mmap`` is accepted and the file is read whole. trainkit's ``.npz`` archives
    and ``.safetensors`` files never hold code, whatever ``weights_only``.

    >>> import io, trainkit
    >>> buffer = io.BytesIO()
    >>> save([trainkit.arange(3), {"lr": 0.1}], buffer)
    >>> _ = buffer.seek(0)
    >>> load(buffer, map_location="cpu")
    [tensor([0, 1, 2]), {'lr': 0.1}]
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("trainkit.load reads pickles with its own unpickler; pickle_module is not supported")
    if pickle_load_args and set(pickle_load_args) != {"encoding"}:
        raise TypeError(f"trainkit.load got unexpected arguments {sorted(pickle_load_args)}")
    weights_only = resolve_weights_only(weights_only)
    place = placement(map_location)  # a bad map_location is refused before the file is opened
    where = (getattr(f, "name", None) or "the file object") if hasattr(f, "read") else str(f)
    if not hasattr(f, "read") and not Path(f).is_file():
        raise FileNotFoundError(f"no such file: {f}")
    if not hasattr(f, "read") and Path(f).suffix.lower() == ".safetensors":
        return _on_device(_load_safetensors(Path(f)), place("cpu"))
    encoding = pickle_load_args.get("encoding", "utf-8")
    if _is_torch_archive(f):  # a file torch.save (or save under a .pt name) wrote
        return load_torch_file(f, map_location, weights_only, encoding)
    if not hasattr(f, "read") and Path(f).suffix.lower() in (".pt", ".pth") and not _written_by_save(f):
        return load_torch_file(f, map_location, weights_only, encoding)  # a damaged .pt file: names what is wrong
    meta, arrays = _read_archive(f, where, _expect)
    try:
        return _decode(meta, arrays, place("cpu"))
    except KeyError as err:
        raise FileFormatError(f"{where}: its structure names array {err.args[0]!r}, which the file lacks") from None
    except RecursionError:
        raise FileFormatError(f"{where}: its structure is nested too deeply to be a saved state") from None
    except (TypeError, AttributeError, ValueError) as err:
        raise FileFormatError(f"{where}: its structure is not one trainkit.save writes ({err})") from None


TRUE_VALUES = ("1", "y", "yes", "true")


def resolve_weights_only(weights_only: bool | None) -> bool:
    """``load``'s ``weights_only`` after torch's two environment variables: ``None`` (not passed) is ``True``
    unless ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is set; ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` forces ``True``.

    >>> resolve_weights_only(None), resolve_weights_only(False)
    (True, False)
    """
    force = os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in TRUE_VALUES
    force_no = os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in TRUE_VALUES
    if force and force_no:
        raise RuntimeError(
            "Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` "
            "should be set, but both were set."
        )
    if force:
        return True
    if weights_only is None and force_no:
        warn_user(
            "Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since the `weights_only` argument was "
            "not explicitly passed to `torch.load`, forcing weights_only=False.",
            UserWarning,
        )
        return False
    return True if weights_only is None else bool(weights_only)


def _is_torch_archive(f) -> bool:
    """Whether ``f`` is a zip archive holding one ``<name>/data.pkl`` and no trainkit structure document."""
    start = f.tell() if hasattr(f, "read") else 0
    try:
        with zipfile.ZipFile(f) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return False
    finally:
        if hasattr(f, "read"):
            f.seek(start)
    return f"{_META}.npy" not in names and any(n.endswith("/data.pkl") and n.count("/") == 1 for n in names)


def _written_by_save(path) -> bool:
    """Whether ``path`` is an archive ``save`` wrote (it may have any suffix), not one of torch's."""
    try:
        with zipfile.ZipFile(path) as archive:
            return f"{_META}.npy" in archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def _on_device(obj, dev):
    if dev is None or dev == CPU:
        return obj
    if isinstance(obj, Tensor):
        return obj.to(dev)
    if isinstance(obj, dict):
        return type(obj)((k, _on_device(v, dev)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_on_device(v, dev) for v in obj)
    return obj


def _read_archive(f, where: str, expect: dict | None = None) -> tuple[object, dict]:
    """The JSON structure and the arrays of a file written by ``save``. Every member's header (dtype, shape, size)
    is checked, and against ``expect`` (shapes by path, a model's), before any data is read, so that a broken,
    hostile or mismatched file is refused without reading it."""
    try:
        archive = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise FileFormatError(f"{where}: not a file written by trainkit.save (not a readable archive: {err})") from None
    with archive:
        infos = {info.filename: info for info in archive.infolist()}
        meta_info = infos.pop(f"{_META}.npy", None)
        if meta_info is None:
            raise FileFormatError(f"{where}: not a file written by trainkit.save (it has no {_META} entry)")
        if meta_info.file_size > MAX_STRUCTURE_BYTES:
            raise FileFormatError(
                f"{where}: its structure document is {meta_info.file_size} bytes, more than any saved state needs"
            )
        text = _read_member(archive, meta_info, where, "U")
        try:
            meta = json.loads(str(text))
        except RecursionError:
            raise FileFormatError(f"{where}: its structure is nested too deeply to be a saved state") from None
        except ValueError as err:
            raise FileFormatError(f"{where}: its structure document is not valid JSON ({err})") from None
        expected = _expected_members(meta, expect or {})
        for name, info in infos.items():  # every header first: nothing large is read from a file refused later
            shape, _ = _read_member(archive, info, where, "biuf", data=False)
            if name in expected and shape != expected[name][1]:
                key, want = expected[name]
                raise FileFormatError(
                    f"{where}: {key} has shape {shape} in the file but {want} in the model; nothing was loaded"
                )
        arrays = {name.removesuffix(".npy"): _read_member(archive, info, where, "biuf") for name, info in infos.items()}
    return meta, arrays


def _read_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, kinds: str, data: bool = True
) -> np.ndarray | tuple:
    """A member's array, its header checked first; with ``data=False`` only the header's (shape, dtype)."""
    member = f"{where}: member {info.filename}"
    if info.compress_type != zipfile.ZIP_STORED and info.file_size > MAX_EXPANSION * max(info.compress_size, 1):
        raise FileFormatError(
            f"{member} would inflate from {info.compress_size} to {info.file_size} bytes; "
            "trainkit.save stores arrays uncompressed, so this is no saved state"
        )
    try:
        with archive.open(info) as fp:
            version = np.lib.format.read_magic(fp)
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = header(fp)
            if dtype.hasobject or dtype.kind not in kinds:
                raise FileFormatError(f"{member} holds {dtype} data; only numeric and bool arrays are loaded")
            count = int(np.prod(shape, dtype=np.int64))
            if info.file_size != fp.tell() + count * dtype.itemsize:
                raise FileFormatError(
                    f"{member} declares {tuple(shape)} {dtype} ({count * dtype.itemsize} bytes) "
                    f"but holds {info.file_size - fp.tell()} bytes"
                )
            if not data:
                return tuple(shape), dtype
            array = np.empty(count, dtype=dtype)
            if fp.readinto(array.view(np.uint8)) != array.nbytes:
                raise FileFormatError(f"{member} ends before its data does (a truncated file)")
    except FileFormatError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as err:
        raise FileFormatError(f"{member} cannot be read ({type(err).__name__}: {err})") from None
    return array.reshape(shape, order="F" if fortran else "C")


def _expected_members(meta, expect: dict) -> dict:
    """Member name -> (dotted key, expected shape) for the tensors ``expect`` names by path, e.g.
    ``{("model", "hidden.weight"): (10, 1)}``."""
    found = {}
    for path, shape in expect.items():
        node = meta
        for part in path:
            node = node.get(f"s:{part}") if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(_TENSOR), int):
            found[f"a{node[_TENSOR]}.npy"] = (".".join(path), tuple(shape))
    return found
