"""Read PyTorch's ``.pt`` / ``.pth`` files without PyTorch and without running any code stored in them.

``torch.save`` writes a zip archive: ``<name>/data.pkl`` is a pickle of the saved object in which every tensor is
a call to ``torch._utils._rebuild_tensor_v2`` on a *persistent id* naming a storage, ``<name>/data/<key>`` holds
each storage's raw bytes, ``<name>/byteorder`` says how they are ordered. A pickle can name any importable function
and call it, so a file from elsewhere is only as safe as the reader's list of names it accepts.

``load_torch_file`` accepts the names that ``torch.load(weights_only=True)`` accepts for plain state dicts and
checkpoints (the tensor rebuild functions, the storage classes, ``collections.OrderedDict``, ``torch.Size``,
dtypes, devices and the primitive containers), each mapped to this module's rebuild functions or to a plain
Python or trainkit counterpart, plus what ``add_safe_globals`` trusts; anything else is refused with
``UnsafeGlobalError`` (torch's words) before it is looked up, so nothing in the file is imported or run, and BUILD
may not change those shared objects. Storages become NumPy arrays, tensors trainkit Tensors viewing them (views of
one storage share memory, as in torch), where they were saved from (the CPU when that GPU is not here) or where
``map_location`` sends them.

With ``weights_only=False`` the pickle runs as Python's pickle runs it (only for files you trust): classes are
imported, a name under ``torch.`` is looked up under ``trainkit.`` instead (``torch.nn.modules.linear.Linear``
as ``trainkit.nn.modules.linear.Linear``), and tensors are still rebuilt by this module.
"""

from __future__ import annotations

import importlib
import io
import os
import pickle
import pickletools
import zipfile
import zlib
from collections import Counter, OrderedDict
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..autograd.backend import (
    BFLOAT16_NP,
    bfloat16,
    bool_,
    device,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
)
from ..autograd.creation import from_numpy
from ..autograd.hooks import HookDict
from ..autograd.tensor import Tensor
from ..layers.parameter import Parameter
from .allowlist import get_safe_globals, lookup, unsupported_global_message
from .files import MAX_EXPANSION, MAX_STRUCTURE_BYTES
from .locations import placement

__all__ = ["TorchFileError", "UnsafeGlobalError", "get_unsafe_globals_in_checkpoint", "load_torch_file"]

# torch's legacy (before 1.6) format starts with a protocol-2 pickle of this magic number
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"

# storage class name -> NumPy dtype of its elements (byte order added when the file says which)
_STORAGE_DTYPES = {
    "FloatStorage": "f4",
    "DoubleStorage": "f8",
    "HalfStorage": "f2",
    "BFloat16Storage": "u2",
    "LongStorage": "i8",
    "IntStorage": "i4",
    "ShortStorage": "i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
    "UntypedStorage": "u1",
}
_TORCH_DTYPES = {
    "float16": float16,
    "half": float16,
    "bfloat16": bfloat16,
    "float32": float32,
    "float": float32,
    "float64": float64,
    "double": float64,
    "int8": int8,
    "int16": int16,
    "short": int16,
    "int32": int32,
    "int": int32,
    "int64": int64,
    "long": int64,
    "uint8": uint8,
    "bool": bool_,
}


class TorchFileError(pickle.UnpicklingError):
    """A file ``load_torch_file`` cannot read: corrupt, truncated, in a legacy format or not a torch file."""


class UnsafeGlobalError(TorchFileError):
    """The file's pickle names a global outside the allowed list (it could run code if loaded by pickle)."""


class _StorageType:
    """Stands for one of torch's storage classes (``torch.FloatStorage``) in a persistent id."""

    def __init__(self, name: str):
        self.name = name
        self.np = np.dtype(_STORAGE_DTYPES[name])


class _Storage:
    """A storage read from the archive: a flat NumPy array in native byte order."""

    def __init__(self, array: np.ndarray, key: str, kind: str, target: device):
        self.array, self.key, self.kind, self.target = array, key, kind, target


class _Marker:
    """Stands for ``torch.Tensor`` / ``torch.nn.Parameter`` when named as the type in ``_rebuild_from_type_v2``."""

    def __init__(self, name: str):
        self.name = name


def _encode(text: str, encoding: str = "latin1") -> bytes:
    # protocol 2 (torch.save's default) pickles bytes as _codecs.encode(str, 'latin1'): allow just that
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is allowed only as pickle's encoding of bytes")
    return text.encode("latin1")


class _Unpickler(pickle._Unpickler):
    """Unpickles ``data.pkl`` of one archive, calling only the functions of this module.

    It is pickle's Python unpickler, whose opcodes can be replaced one by one (the C one's cannot): BUILD sets
    attributes on any object on the stack, the allowed globals included, so a file could rewrite
    ``collections.Counter`` or ``trainkit.float32`` for the whole process; here it may only set the attributes of
    an OrderedDict it made (a state dict's ``_metadata``), the new attributes of a tensor and the state of an
    instance of a class ``add_safe_globals`` trusts. With ``weights_only=False`` it is pickle, tensors aside.
    """

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(
        self,
        file,
        path: Path | str,
        archive: zipfile.ZipFile,
        prefix: str,
        byteorder: str,
        weights_only: bool = True,
        map_location: Any = None,
        encoding: str = "utf-8",
    ):
        super().__init__(file, encoding=encoding)  # the encoding of Python 2's strings, as torch.load's
        self.path, self.archive, self.prefix = path, archive, prefix
        self.weights_only, self.place = weights_only, placement(map_location)
        self.order = ">" if byteorder == "big" else "<"
        self.storages: dict[str, _Storage] = {}
        builtins = {"set": set, "complex": complex, "bytearray": self.bytearray}
        self.tensor_type, self.parameter_type = _Marker("Tensor"), _Marker("Parameter")
        self.allowed: dict[tuple[str, str], Any] = {
            ("collections", "OrderedDict"): OrderedDict,
            ("collections", "Counter"): Counter,
            # a Module's hook tables, where torch pickles an OrderedDict: a plain dict that runs nothing
            ("trainkit.autograd.hooks", "HookDict"): HookDict,
            ("torch", "Size"): tuple,
            ("torch", "device"): device,
            ("torch._utils", "_rebuild_tensor"): self.rebuild_tensor,
            ("torch._utils", "_rebuild_tensor_v2"): self.rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): self.rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): self.rebuild_parameter,
            ("torch._tensor", "_rebuild_from_type_v2"): self.rebuild_from_type,
            ("_codecs", "encode"): _encode,
            **{("builtins", k): v for k, v in builtins.items()},
            **{("__builtin__", k): v for k, v in builtins.items()},  # written by Python 2
            ("torch", "Tensor"): self.tensor_type,
            ("torch.nn.parameter", "Parameter"): self.parameter_type,
            **{("torch", k): _StorageType(k) for k in _STORAGE_DTYPES},
            ("torch.storage", "UntypedStorage"): _StorageType("UntypedStorage"),
            **{("torch", k): v for k, v in _TORCH_DTYPES.items()},
        }

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        trusted = [entry[0] if isinstance(entry, tuple) else entry for entry in get_safe_globals()]
        if not self.weights_only or any(type(inst) is t for t in trusted):
            self.stack.append(state)  # pickle's own BUILD: __setstate__, or the instance's __dict__ and slots
            pickle._Unpickler.load_build(self)
        elif type(inst) in (OrderedDict, Counter, HookDict) or isinstance(inst, Tensor):
            self.set_state(inst, state)
        else:
            raise self.fail(
                f"refusing to set the state of a {type(inst).__name__} (only a state dict's metadata and "
                "tensor attributes may be set)",
                UnsafeGlobalError,
            )

    dispatch[pickle.BUILD[0]] = load_build

    def fail(self, message: str, error: type[TorchFileError] = TorchFileError) -> TorchFileError:
        return error(f"{self.path}: {message}")

    def bytearray(self, source=b"", *args) -> bytearray:
        """``bytearray`` as pickles call it (from bytes, or from a str and its encoding), never from a number: that
        form allocates as many zero bytes as the number says, so a few bytes of pickle could ask for gigabytes."""
        if not isinstance(source, (bytes, bytearray, str)):
            raise self.fail(f"bytearray({type(source).__name__}) is not how pickle writes a bytearray; refused")
        return bytearray(source, *args)

    def find_class(self, module: str, name: str):
        if (module, name) in self.allowed:
            return self.allowed[(module, name)]
        if not self.weights_only:
            return self.import_global(module, name)
        trusted = lookup(module, name)
        if trusted is not None:
            return trusted
        raise self.fail(unsupported_global_message(module, name, str(self.path)), UnsafeGlobalError)

    def import_global(self, module: str, name: str):
        """A global of a trusted file: torch's names as trainkit's, the others imported as pickle does."""
        if module != "torch" and not module.startswith("torch."):
            return super().find_class(module, name)
        ours = "trainkit" + module.removeprefix("torch")
        try:
            found = importlib.import_module(ours)
            for part in name.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError):
            raise self.fail(
                f"the file names torch's {module}.{name}, and trainkit has no {ours}.{name} to load it as; a whole "
                "torch model loads in torch: save its state_dict() with torch.save and load that into a trainkit "
                "model"
            ) from None
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise self.fail(f"unknown persistent id {pid!r} (expected ('storage', type, key, location, numel))")
        _, kind, key, location, numel = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str) or not isinstance(numel, int):
            raise self.fail(f"malformed storage record {pid!r}")
        if key in self.storages:
            storage = self.storages[key]
            if storage.kind != kind.name:
                raise self.fail(f"storage {key} is read both as {storage.kind} and {kind.name}")
            return storage
        name = f"{self.prefix}data/{key}"
        declared = member_size(self.path, self.archive, name)
        if declared != numel * kind.np.itemsize:  # checked on the zip header, before anything is read
            raise self.fail(
                f"storage {name} has {declared} bytes; {numel} elements of {kind.name} need "
                f"{numel * kind.np.itemsize} (the file is truncated or corrupt)"
            )
        raw = read_member(self.path, self.archive, name)
        array = np.frombuffer(bytearray(raw), dtype=kind.np.newbyteorder(self.order))
        array = array.astype(array.dtype.newbyteorder("="), copy=False)
        if kind.name == "BFloat16Storage":  # read as its 16-bit patterns, in the file's byte order
            array = array.view(BFLOAT16_NP)
        target = self.place(location if isinstance(location, str) else "cpu", array)
        self.storages[key] = _Storage(array, key, kind.name, target)
        return self.storages[key]

    def rebuild_tensor(
        self, storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None
    ) -> Tensor:
        if not isinstance(storage, _Storage):
            raise self.fail(f"a tensor's storage is a {type(storage).__name__}, not a storage record")
        size, stride = tuple(size), tuple(stride)
        numbers = (storage_offset, *size, *stride)
        if len(size) != len(stride) or not all(isinstance(n, int) and n >= 0 for n in numbers):
            raise self.fail(f"bad tensor layout: offset {storage_offset!r}, size {size!r}, stride {stride!r}")
        array = storage.array
        last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
        if 0 not in size and last >= array.size:
            # as_strided does not check bounds: a bad layout would read memory outside the storage
            raise self.fail(
                f"a tensor of size {size}, stride {stride} at offset {storage_offset} reaches past "
                f"the {array.size} elements of storage {storage.key}"
            )
        view = np.lib.stride_tricks.as_strided(
            array[storage_offset:] if 0 not in size else array[:0], size, tuple(s * array.itemsize for s in stride)
        )
        tensor = from_numpy(view)
        if storage.target.type != "cpu":
            tensor = tensor.to(storage.target)
        if requires_grad:
            tensor.requires_grad_(True)
        return tensor

    def rebuild_parameter(self, data, requires_grad, backward_hooks=None, state=None) -> Parameter:
        if not isinstance(data, Tensor):
            raise self.fail(f"a Parameter's data is a {type(data).__name__}, not a tensor")
        param = Parameter(data, bool(requires_grad))
        self.set_state(param, state)
        return param

    def rebuild_from_type(self, func, new_type, args, state) -> Tensor:
        result = func(*args)
        if new_type is self.parameter_type and not isinstance(result, Parameter):
            result = Parameter(result, result.requires_grad)
        elif new_type not in (self.tensor_type, self.parameter_type):
            raise self.fail(f"tensor subclass {new_type!r} is not supported")
        self.set_state(result, state)
        return result

    def set_state(self, obj: Any, state) -> None:
        """New attributes of a loaded tensor or of a state dict (its ``_metadata``), none shadowing the class's."""
        if state and not isinstance(state, dict):
            raise self.fail(f"the state of a {type(obj).__name__} is a {type(state).__name__}, not a dict")
        for name, value in (state or {}).items():
            private = isinstance(name, str) and name.startswith("_") and name != "_metadata"
            if not isinstance(name, str) or private or hasattr(type(obj), name):
                raise self.fail(
                    f"attribute {name!r} in the file would replace one of {type(obj).__name__}", UnsafeGlobalError
                )
            setattr(obj, name, value)


def member_size(path: Path, archive: zipfile.ZipFile, name: str, limit: int | None = None) -> int:
    """The size one archive member declares in its zip header, checked before it is read: at most ``limit`` bytes,
    and inflating at most ``MAX_EXPANSION`` times (torch.save stores members uncompressed).

    >>> import io
    >>> buf = io.BytesIO()
    >>> with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
    ...     z.writestr("m/data/0", bytes(10_000_000))
    >>> member_size(Path("m.pt"), zipfile.ZipFile(buf), "m/data/0")
    Traceback (most recent call last):
    ...
    trainkit.serialization.torch_pickle.TorchFileError: m.pt: m/data/0 would inflate from ... to 10000000 bytes; ...
    """
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise TorchFileError(f"{path}: the archive has no {name} (the file is truncated or corrupt)") from None
    if info.compress_type != zipfile.ZIP_STORED and info.file_size > MAX_EXPANSION * max(info.compress_size, 1):
        raise TorchFileError(
            f"{path}: {name} would inflate from {info.compress_size} to {info.file_size} bytes; torch.save stores "
            "its members uncompressed, so this file was not written by it"
        )
    if limit is not None and info.file_size > limit:
        raise TorchFileError(
            f"{path}: {name} is {info.file_size} bytes, more than a state dict's structure needs (objects pickled "
            "inline, such as NumPy arrays, load from a file you trust with weights_only=False)"
        )
    return info.file_size


def read_member(path: Path, archive: zipfile.ZipFile, name: str) -> bytes:
    """The bytes of one archive member; a missing or damaged member is a ``TorchFileError`` naming the file.

    >>> import io
    >>> buf = io.BytesIO(); zipfile.ZipFile(buf, "w").close()
    >>> read_member(Path("m.pt"), zipfile.ZipFile(buf), "m/data.pkl")
    Traceback (most recent call last):
    ...
    trainkit.serialization.torch_pickle.TorchFileError: m.pt: the archive has no m/data.pkl (the file is truncated ...)
    """
    member_size(path, archive, name)
    try:
        return archive.read(name)
    except KeyError:
        raise TorchFileError(f"{path}: the archive has no {name} (the file is truncated or corrupt)") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as e:
        raise TorchFileError(f"{path}: cannot read {name} from the archive: {e} (the file is corrupt)") from e


def _head(f: Any, start: int, size: int) -> bytes:
    f.seek(start)
    return f.read(size)


def _not_a_zip(path: Path | str, f: Any) -> TorchFileError:
    start = f.tell()
    head, tar = _head(f, start, len(_LEGACY_MAGIC)), _head(f, start + 257, 5) == b"ustar"
    f.seek(start)
    if head == _LEGACY_MAGIC or tar:
        return TorchFileError(
            f"{path} is in PyTorch's legacy format (written by torch older than 1.6), which this reader does not "
            "support; re-save it with a current torch: torch.save(torch.load(path), path)"
        )
    if head.startswith(b"PK"):
        return TorchFileError(f"{path}: the zip archive is truncated or corrupt (no central directory)")
    return TorchFileError(f"{path} is not a PyTorch file: torch.save writes a zip archive, this is not one")


def _record_prefix(path: Path, names: list[str]) -> str:
    """The folder holding ``data.pkl`` (torch names it after the file; any name is accepted)."""
    if any(n.endswith("/constants.pkl") and n.count("/") == 1 for n in names):
        # its data.pkl pickles the scripted module's classes, which are code
        raise TorchFileError(
            f"{path} is a TorchScript archive (torch.jit.save), not a torch.save file; save the "
            "model's state_dict() with torch.save and load that"
        )
    pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) == 1:
        return pickles[0][: -len("data.pkl")]
    found = "none" if not pickles else ", ".join(pickles)
    raise TorchFileError(f"{path}: expected one <name>/data.pkl in the archive, found {found}")


def load_torch_file(
    f: str | os.PathLike | IO[bytes], map_location: Any = None, weights_only: bool = True, encoding: str = "utf-8"
) -> Any:
    """Load what ``torch.save`` (or ``trainkit.save`` under a ``.pt`` name) wrote, from a path or a binary file
    object, without torch.

    Tensors come back as trainkit Tensors where they were saved from (the CPU when that GPU is not here) or where
    ``map_location`` sends them (Parameters where they
    were saved as ones, with the saved ``requires_grad``), views of one storage sharing memory; bfloat16 stays
    bfloat16. With ``weights_only=True`` (the default, as torch's) a pickle naming
    anything but tensors, storages, plain containers and what ``add_safe_globals`` trusts raises
    ``UnsafeGlobalError`` (a ``pickle.UnpicklingError``) naming the file and the global, in torch's words, and
    nothing in the file runs; ``weights_only=False`` unpickles whatever the file holds (trusted files only).
    Files in torch's pre-1.6 format, TorchScript archives and damaged files raise ``TorchFileError`` naming the file.

    >>> import torch                                        # doctest: +SKIP
    >>> torch.save(torch.nn.Linear(3, 2).state_dict(), "linear.pt")     # doctest: +SKIP
    >>> sd = load_torch_file("linear.pt")                   # doctest: +SKIP
    >>> {k: tuple(v.shape) for k, v in sd.items()}          # doctest: +SKIP
    {'weight': (2, 3), 'bias': (2,)}
    >>> trainkit.nn.Linear(3, 2).load_state_dict(sd)        # doctest: +SKIP
    <All keys matched successfully>
    """
    if hasattr(f, "read"):
        return _load_from(f, getattr(f, "name", None) or "the file object", map_location, weights_only, encoding)
    path = Path(f)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, "rb") as opened:
        return _load_from(opened, path, map_location, weights_only, encoding)


def _load_from(f: IO[bytes], path: Path | str, map_location: Any, weights_only: bool, encoding: str) -> Any:
    start = f.tell()
    if not zipfile.is_zipfile(f):
        f.seek(start)
        raise _not_a_zip(path, f)
    f.seek(start)
    try:
        archive = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise TorchFileError(f"{path}: the zip archive is corrupt: {e}") from e
    with archive:
        prefix = _record_prefix(path, archive.namelist())
        names = set(archive.namelist())
        byteorder = "little"  # files from torch 1.6-1.9 have no byteorder record; they were all little-endian
        if f"{prefix}byteorder" in names:
            byteorder = read_member(path, archive, f"{prefix}byteorder").decode("ascii", "replace").strip()
            if byteorder not in ("little", "big"):
                raise TorchFileError(f"{path}: unknown byte order {byteorder!r} in {prefix}byteorder")
        # a trusted pickle may hold large objects inline (NumPy arrays); an allowlisted one holds a structure only
        member_size(path, archive, f"{prefix}data.pkl", limit=MAX_STRUCTURE_BYTES if weights_only else None)
        data = io.BytesIO(read_member(path, archive, f"{prefix}data.pkl"))
        unpickler = _Unpickler(data, path, archive, prefix, byteorder, weights_only, map_location, encoding)
        try:
            result = unpickler.load()
        except TorchFileError:
            raise
        except Exception as e:  # any failure inside the pickle means a damaged or foreign file
            if not weights_only:
                raise  # a trusted file's own code failed (a class that cannot be imported here): pickle's error
            raise TorchFileError(
                f"{path}: cannot unpickle {prefix}data.pkl: {type(e).__name__}: {e} "
                "(the file is truncated, corrupt or not a torch.save file)"
            ) from e
    return result


def get_unsafe_globals_in_checkpoint(f: str | os.PathLike | IO[bytes]) -> list[str]:
    """The globals a ``torch.save`` file names that ``weights_only=True`` would refuse (neither allowed by default
    nor trusted with ``add_safe_globals``), read from the pickle's opcodes without running it, as
    ``torch.serialization.get_unsafe_globals_in_checkpoint``.

    >>> import collections, io, trainkit
    >>> buffer = io.BytesIO()
    >>> trainkit.save({"w": trainkit.ones(1), "c": collections.ChainMap()}, buffer)
    >>> get_unsafe_globals_in_checkpoint(buffer)
    ['collections.ChainMap']
    """
    if hasattr(f, "read"):
        where, opened, start = getattr(f, "name", None) or "the file object", f, f.tell()
    else:
        where, opened, start = str(f), open(f, "rb"), 0
    try:
        if not zipfile.is_zipfile(opened):
            opened.seek(start)
            raise _not_a_zip(where, opened)
        opened.seek(start)
        with zipfile.ZipFile(opened) as archive:
            prefix = _record_prefix(where, archive.namelist())
            member_size(where, archive, f"{prefix}data.pkl", limit=MAX_STRUCTURE_BYTES)
            data = read_member(where, archive, f"{prefix}data.pkl")
    finally:
        if opened is not f:
            opened.close()
        else:
            f.seek(start)
    allowed = set(_Unpickler(io.BytesIO(), where, None, prefix, "little").allowed)
    found: list[str] = []
    try:
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name in ("GLOBAL", "INST"):
                module, name = arg.split(" ", 1)
                qualified = f"{module}.{name}"
                if (module, name) not in allowed and lookup(module, name) is None and qualified not in found:
                    found.append(qualified)
    except ValueError as e:
        raise TorchFileError(f"{where}: cannot read {prefix}data.pkl: {e} (the file is truncated or corrupt)") from e
    return found
