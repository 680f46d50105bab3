"""Write PyTorch's ``.pt`` format without PyTorch: ``torch.load(path, weights_only=True)`` reads the result.

The file is what ``torch.save`` writes: a zip archive with ``archive/data.pkl`` (a protocol-2 pickle of the object),
``archive/data/<key>`` (each tensor's bytes, one storage per tensor), ``archive/byteorder`` and ``archive/version``.
The pickle is emitted here opcode by opcode, since Python's pickler would need torch importable to name torch's
globals; it names only what ``weights_only`` loading accepts: ``torch._utils._rebuild_tensor_v2`` and
``_rebuild_parameter``, the typed storage classes, and ``collections.OrderedDict``.
"""

from __future__ import annotations

import os
import struct
import zipfile
from collections import OrderedDict
from typing import Any

import numpy as np

from ..autograd.tensor import Tensor
from ..layers.parameter import Parameter
from .files import temporary_beside

__all__ = ["save_torch_file"]

# NumPy dtype name -> torch's typed storage class
_STORAGES = {
    "float32": "FloatStorage",
    "float64": "DoubleStorage",
    "float16": "HalfStorage",
    "int64": "LongStorage",
    "int32": "IntStorage",
    "int16": "ShortStorage",
    "int8": "CharStorage",
    "uint8": "ByteStorage",
    "bool": "BoolStorage",
}


class _Pickle:
    """A protocol-2 pickle of dicts, lists, tuples, numbers, strings, None and tensors, written opcode by opcode;
    ``storages`` collects the tensors' arrays in the order their keys were given."""

    def __init__(self) -> None:
        self.out = bytearray(b"\x80\x02")  # PROTO 2
        self.storages: list[np.ndarray] = []

    def finish(self) -> bytes:
        return bytes(self.out + b".")  # STOP

    def global_(self, module: str, name: str) -> None:
        self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"

    def value(self, obj: Any, where: str) -> None:
        out = self.out
        if isinstance(obj, np.generic):  # a NumPy number is saved as the Python number it holds
            obj = obj.item()
        if obj is None:
            out += b"N"
        elif obj is True or obj is False:
            out += b"\x88" if obj else b"\x89"
        elif isinstance(obj, int):
            data = obj.to_bytes((obj.bit_length() + 8) // 8 or 1, "little", signed=True)
            out += b"\x8a" + bytes([len(data)]) + data  # LONG1
        elif isinstance(obj, float):
            out += b"G" + struct.pack(">d", obj)  # BINFLOAT
        elif isinstance(obj, str):
            data = obj.encode("utf-8")
            out += b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE
        elif isinstance(obj, Tensor):
            self.tensor(obj)
        elif isinstance(obj, dict):
            if isinstance(obj, OrderedDict):
                self.global_("collections", "OrderedDict")
                out += b")R"  # an empty tuple, REDUCE: OrderedDict()
            else:
                out += b"}"
            if obj:
                out += b"("  # MARK
                for k, v in obj.items():
                    if not isinstance(k, (str, int)):
                        raise TypeError(f"cannot save a {type(k).__name__} key at {where} in a .pt file")
                    self.value(k, where)
                    self.value(v, f"{where}[{k!r}]")
                out += b"u"  # SETITEMS
        elif isinstance(obj, list):
            out += b"]"  # EMPTY_LIST, then MARK ... APPENDS (weights_only loading knows no LIST opcode)
            if obj:
                out += b"("
                for i, v in enumerate(obj):
                    self.value(v, f"{where}[{i}]")
                out += b"e"
        elif isinstance(obj, tuple):
            out += b"("
            for i, v in enumerate(obj):
                self.value(v, f"{where}[{i}]")
            out += b"t"
        else:
            raise TypeError(
                f"cannot save an object of type {type(obj).__name__} at {where} in a .pt file: it holds "
                "tensors, numbers, strings, None and dicts, lists or tuples of them"
            )

    def tensor(self, t: Tensor) -> None:
        array = np.require(t.detach().cpu().numpy(), requirements="C")  # ascontiguousarray would make 0-d 1-d
        storage = _STORAGES.get(array.dtype.name)
        if storage is None:
            raise TypeError(f"cannot save a {array.dtype} tensor in a .pt file")
        parameter = isinstance(t, Parameter)
        if parameter:
            self.global_("torch._utils", "_rebuild_parameter")
            self.out += b"("
        self.global_("torch._utils", "_rebuild_tensor_v2")
        self.out += b"("
        # the storage, as torch's persistent id: ('storage', storage class, key, location, number of elements)
        self.out += b"("
        self.value("storage", "")
        self.global_("torch", storage)
        self.value(str(len(self.storages)), "")
        self.value("cpu", "")
        self.value(int(array.size), "")
        self.out += b"tQ"  # TUPLE, BINPERSID
        self.storages.append(array)
        self.value(0, "")  # storage offset
        self.value(tuple(int(n) for n in array.shape), "")
        strides = [1] * array.ndim  # C order, as torch describes a contiguous tensor (also an empty one)
        for i in range(array.ndim - 2, -1, -1):
            strides[i] = strides[i + 1] * max(array.shape[i + 1], 1)
        self.value(tuple(strides), "")
        self.value(bool(t.requires_grad) and t.is_leaf and not parameter, "")  # a non-leaf comes back as data
        self.global_("collections", "OrderedDict")
        self.out += b")R"  # backward hooks: OrderedDict()
        self.out += b"tR"  # TUPLE, REDUCE: _rebuild_tensor_v2(...)
        if parameter:
            self.value(bool(t.requires_grad), "")
            self.global_("collections", "OrderedDict")
            self.out += b")RtR"  # _rebuild_parameter(tensor, requires_grad, OrderedDict())


def save_torch_file(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` (a state dict, or dicts, lists and tuples of tensors, numbers and strings) as ``torch.save``
    would, so that ``torch.load(path, weights_only=True)`` reads it; the file is written whole or not at all.

    >>> import tempfile, pathlib, trainkit
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "w.pt"
    >>> save_torch_file({"w": trainkit.ones(2)}, path)
    >>> trainkit.load(path)
    {'w': tensor([1., 1.])}
    """
    pickle = _Pickle()
    pickle.value(obj, "the top level")
    tmp = temporary_beside(path)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr("archive/data.pkl", pickle.finish())
            archive.writestr("archive/byteorder", "little")
            for key, array in enumerate(pickle.storages):
                archive.writestr(f"archive/data/{key}", array.astype(array.dtype.newbyteorder("<")).tobytes())
            archive.writestr("archive/version", "3\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
