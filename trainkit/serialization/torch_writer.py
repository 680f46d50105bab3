"""Write PyTorch's ``.pt`` format without PyTorch: ``torch.load`` reads the result, and ``trainkit.load`` too.

The file is what ``torch.save`` writes: a zip archive with ``archive/data.pkl`` (a protocol-2 pickle of the object),
``archive/data/<key>`` (each storage's bytes, 64-byte aligned; views of one array share one storage, as torch's
views do), ``archive/byteorder`` and
``archive/version``. Any picklable object may be saved. Tensors are pickled as torch pickles its own: a call to
``torch._utils._rebuild_tensor_v2`` on a *persistent id* naming a typed storage (``torch.FloatStorage``), wrapped
in ``_rebuild_parameter`` for a Parameter; trainkit's dtypes and devices become ``torch.float32`` and
``torch.device``, NumPy numbers Python numbers. Those names are written as they are spelled in torch (Python's
pickler would need torch importable to name them), so a state dict saved here is what
``torch.load(weights_only=True)`` accepts.
Everything else (a whole model, a dataclass, a NumPy array) is pickled by Python's pickler, naming its own classes:
a trainkit model loads back in trainkit, with ``weights_only=False``.
"""

from __future__ import annotations

import os
import pickle
import struct
import types
import zipfile
from collections import OrderedDict
from typing import IO, Any

import numpy as np

from ..autograd.backend import BFLOAT16_NP, device, dtype
from ..autograd.tensor import Tensor
from ..layers.parameter import Parameter
from .files import temporary_beside

__all__ = ["save_torch_file"]

# NumPy dtype name -> torch's typed storage class
_STORAGES = {
    "float32": "FloatStorage",
    "float64": "DoubleStorage",
    "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage",
    "int64": "LongStorage",
    "int32": "IntStorage",
    "int16": "ShortStorage",
    "int8": "CharStorage",
    "uint8": "ByteStorage",
    "bool": "BoolStorage",
}
_ALIGNMENT = 64  # torch.save aligns each storage's bytes in the archive so that torch.load(mmap=True) can map them


class _TorchGlobal:
    """One of torch's names (``torch._utils._rebuild_tensor_v2``), written into the pickle as a GLOBAL."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args: Any) -> None:  # the pickler only accepts callables as the first item of a reduce
        raise TypeError(f"{self.module}.{self.name} is a name in a file, not a function")


class _StorageRecord:
    """A tensor's bytes, pickled as torch's persistent id ``('storage', class, key, location, numel)``."""

    def __init__(self, array: np.ndarray, kind: _TorchGlobal, key: str, location: str):
        self.array, self.kind, self.key, self.location = array, kind, key, location


class _Pickler(pickle._Pickler):
    """Python's pickler (its dispatch can be extended, the C one's cannot) with torch's names for tensors."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file: IO[bytes], protocol: int = 2):
        super().__init__(file, protocol=protocol)  # 2: torch.save's default
        self.storages: list[_StorageRecord] = []
        self.records: dict[int, _StorageRecord] = {}  # id of a storage's array -> its record
        self.names: dict[tuple[str, str], _TorchGlobal] = {}

    def torch_name(self, module: str, name: str) -> _TorchGlobal:
        if (module, name) not in self.names:  # one object per name, so the memo writes each GLOBAL once
            self.names[(module, name)] = _TorchGlobal(module, name)
        return self.names[(module, name)]

    def save_torch_global(self, obj: _TorchGlobal) -> None:
        self.write(b"c" + obj.module.encode() + b"\n" + obj.name.encode() + b"\n")
        self.memoize(obj)

    dispatch[_TorchGlobal] = save_torch_global

    def save_global(self, obj: Any, name: str | None = None) -> None:
        qualname = name or getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "")
        if "<locals>" in qualname:  # the error C's pickler (torch.save's) gives, not the Python one's
            raise AttributeError(f"Can't pickle local object {qualname!r}")
        super().save_global(obj, name)

    dispatch[types.FunctionType] = save_global

    def save_dtype(self, obj: dtype) -> None:
        self.save(self.torch_name("torch", obj.name))

    dispatch[dtype] = save_dtype

    def save_numpy_number(self, obj: np.generic) -> None:
        # the Python number it holds, which torch.load(weights_only=True) accepts (a NumPy scalar it refuses)
        self.save(obj.item())

    for _kind in {t for t in np.sctypeDict.values() if issubclass(t, (np.number, np.bool_))}:
        dispatch[_kind] = save_numpy_number
    del _kind

    def persistent_id(self, obj: Any) -> tuple | None:
        if isinstance(obj, _StorageRecord):
            return ("storage", obj.kind, obj.key, obj.location, int(obj.array.size))
        return None

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            return self.reduce_tensor(obj)
        if isinstance(obj, device):
            return (self.torch_name("torch", "device"), (str(obj),))
        return NotImplemented

    def reduce_tensor(self, t: Tensor) -> tuple:
        array = t.detach().cpu().numpy()
        kind = _STORAGES.get(array.dtype.name)
        if kind is None:
            raise TypeError(f"cannot save a {array.dtype} tensor in a .pt file: torch has no storage for it")
        location = "cpu" if t.device.type == "cpu" else f"{t.device.type}:{t.device.index or 0}"
        root, offset, strides = _in_storage(array)
        record = self.records.get(id(root))
        if record is None or record.array.base is not root:
            record = _StorageRecord(root.reshape(-1), self.torch_name("torch", kind), str(len(self.storages)), location)
            self.storages.append(record)
            self.records[id(root)] = record  # the record keeps root alive, so its id is not reused meanwhile
        parameter = isinstance(t, Parameter)
        requires_grad = bool(t.requires_grad) and not parameter  # a non-leaf comes back a leaf, as torch's does
        rebuild = self.torch_name("torch._utils", "_rebuild_tensor_v2")
        args = (record, offset, tuple(int(n) for n in array.shape), strides, requires_grad, OrderedDict())
        if not parameter:
            return (rebuild, args)
        inner = _Reduced(rebuild, args)
        return (self.torch_name("torch._utils", "_rebuild_parameter"), (inner, bool(t.requires_grad), OrderedDict()))


def _in_storage(array: np.ndarray) -> tuple[np.ndarray, int, tuple[int, ...]]:
    """The array whose memory ``array`` views (its storage), the offset and strides in elements: views of one
    array are saved as views of one storage, as torch saves views. A layout torch cannot describe (negative or
    uneven strides, another dtype, no memory) is saved as a contiguous copy of its own."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    size = array.itemsize
    start = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    steps = [stride // size for stride in array.strides]
    if (
        array.size
        and root.dtype == array.dtype
        and root.flags.c_contiguous
        and start >= 0
        and start % size == 0
        and all(stride >= 0 and stride % size == 0 for stride in array.strides)
        and start // size + sum((n - 1) * s for n, s in zip(array.shape, steps)) < root.size
    ):
        return root, start // size, tuple(steps)
    copy = np.require(array, requirements="C")  # ascontiguousarray would make 0-d 1-d
    strides = [1] * copy.ndim  # C order, as torch describes a contiguous tensor (also an empty one)
    for i in range(copy.ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * max(copy.shape[i + 1], 1)
    if copy is array:
        copy = array.copy()  # an array of its own: no other tensor's storage is keyed by it
    return copy, 0, tuple(strides)


class _Reduced:
    """A value pickled as ``func(*args)``: the plain tensor inside a Parameter's record."""

    def __init__(self, func: _TorchGlobal, args: tuple):
        self.func, self.args = func, args

    def __reduce__(self) -> tuple:
        return (self.func, self.args)


def _write_archive(out: IO[bytes], data: bytes, storages: list[_StorageRecord]) -> None:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        start = out.tell() if out.seekable() else 0
        archive.writestr("archive/data.pkl", data)
        archive.writestr("archive/.format_version", "1")
        archive.writestr("archive/.storage_alignment", str(_ALIGNMENT))
        archive.writestr("archive/byteorder", "little")
        for record in storages:
            name = f"archive/data/{record.key}"
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            if out.seekable():
                # pad the local header's extra field (id "FB", as torch's) so the bytes start on a boundary
                offset = out.tell() - start + 30 + len(name) + 4
                pad = -offset % _ALIGNMENT
                info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            little = np.ascontiguousarray(record.array, dtype=record.array.dtype.newbyteorder("<"))
            if little.dtype == BFLOAT16_NP:  # a buffer cannot carry ml_dtypes' type: its bits are the bytes
                little = little.view(np.uint16)
            archive.writestr(info, memoryview(little.reshape(-1)).cast("B"))  # no copy of a little-endian array
        archive.writestr("archive/version", "3\n")


def save_torch_file(obj: Any, f: str | os.PathLike | IO[bytes], protocol: int = 2) -> None:
    """Write ``obj`` as ``torch.save`` would, to a path (written whole or not at all) or a binary file object.

    >>> import io, trainkit
    >>> buffer = io.BytesIO()
    >>> save_torch_file({"w": trainkit.ones(2)}, buffer)
    >>> _ = buffer.seek(0)
    >>> trainkit.load(buffer)
    {'w': tensor([1., 1.])}
    """
    buffer = _PickleBuffer()
    pickler = _Pickler(buffer, protocol)
    pickler.dump(obj)  # pickle's own error for a lambda, a local class or a lock, as torch.save raises it
    data = bytes(buffer.data)
    if hasattr(f, "write"):
        _write_archive(f, data, pickler.storages)
        return
    tmp = temporary_beside(f)
    try:
        with open(tmp, "wb") as out:
            _write_archive(out, data, pickler.storages)
        os.replace(tmp, f)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


class _PickleBuffer:
    """Where the pickle goes before the archive is opened (it needs the storages the pickle names)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, chunk: bytes) -> int:
        self.data += chunk
        return len(chunk)
