"""Reading .safetensors files: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the bytes.

The format is small enough to read directly, which lets trainkit load what the safetensors package's NumPy API
refuses (bfloat16, kept as trainkit.bfloat16 as for .pt files) and check every declared size against the file
before a byte of data is read. Writing still goes through the safetensors package.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from ..autograd.backend import BFLOAT16_NP
from .files import FileFormatError

MAX_HEADER_BYTES = 100 << 20  # the safetensors package's own limit

# safetensors' dtype names; BF16 is read as its 16 bits, then viewed as bfloat16
DTYPES = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype("<u1"),
    "I8": np.dtype("<i1"),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "F32": np.dtype("<f4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F64": np.dtype("<f8"),
}


def read_header(path: Path, f, size: int) -> tuple[dict, int]:
    """The JSON header (tensor entries and ``__metadata__``) and where the data starts, checked against ``size``."""
    prefix = f.read(8)
    if len(prefix) < 8:
        raise FileFormatError(f"{path}: not a readable safetensors file (shorter than its 8-byte header length)")
    length = int.from_bytes(prefix, "little")
    if length > min(MAX_HEADER_BYTES, size - 8):
        raise FileFormatError(
            f"{path}: not a readable safetensors file (its header claims {length} bytes; the file has {size - 8} "
            f"after the length and headers are limited to {MAX_HEADER_BYTES})"
        )
    try:
        header = json.loads(f.read(length).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FileFormatError(f"{path}: not a readable safetensors file (header: {err})") from None
    if not isinstance(header, dict):
        raise FileFormatError(f"{path}: not a readable safetensors file (its header is not a JSON object)")
    return header, 8 + length


def _entry(path: Path, name: str, entry: object, data_bytes: int) -> tuple[np.dtype, tuple, int, bool]:
    """One tensor's (dtype, shape, offset into the data, is bfloat16), every field checked."""
    where = f"{path}: tensor {name!r}"
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
        raise FileFormatError(f"{where}: its header entry needs dtype, shape and data_offsets")
    kind, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if kind not in DTYPES:
        raise FileFormatError(f"{where} holds {kind} data; trainkit loads {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise FileFormatError(f"{where}: shape {shape!r} is not a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(n, int) for n in offsets)):
        raise FileFormatError(f"{where}: data_offsets {offsets!r} is not [begin, end]")
    begin, end = offsets
    need = math.prod(shape) * DTYPES[kind].itemsize
    if not 0 <= begin <= end <= data_bytes or end - begin != need:
        raise FileFormatError(
            f"{where}: {kind} {tuple(shape)} needs {need} bytes, but its data_offsets [{begin}, {end}] give "
            f"{end - begin} of the {data_bytes} the file holds"
        )
    return DTYPES[kind], tuple(shape), begin, kind == "BF16"


def read_safetensors(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], bool]:
    """The arrays of a .safetensors file in the header's order, and whether any was bfloat16.

    >>> import tempfile, safetensors.numpy  # doctest: +SKIP
    >>> p = tempfile.mkdtemp() + "/w.safetensors"  # doctest: +SKIP
    >>> safetensors.numpy.save_file({"w": np.ones(2, np.float32)}, p)  # doctest: +SKIP
    >>> read_safetensors(p)  # doctest: +SKIP
    ({'w': array([1., 1.], dtype=float32)}, False)
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        header, start = read_header(path, f, size)
        entries = {
            name: _entry(path, name, entry, size - start) for name, entry in header.items() if name != "__metadata__"
        }
        arrays, bfloat16 = {}, False
        for name, (dtype, shape, begin, is_bfloat16) in entries.items():
            f.seek(start + begin)
            count = math.prod(shape)
            array = np.frombuffer(f.read(count * dtype.itemsize), dtype=dtype, count=count).reshape(shape)
            array = array.astype(array.dtype.newbyteorder("="), copy=True)
            if is_bfloat16:  # its bits, read as 16-bit integers in the file's little-endian order
                array, bfloat16 = array.view(BFLOAT16_NP), True
            arrays[name] = array
    return arrays, bfloat16
