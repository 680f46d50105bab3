"""The IDX file format of MNIST and its relatives (http://yann.lecun.com/exdb/mnist/), plain or gzip-compressed.

An IDX file is a 4-byte magic number (two zero bytes, a type code, the number of dimensions), one big-endian
32-bit size per dimension, then the values in C order, big-endian.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np

from ..serialization.files import MAX_EXPANSION

# type code -> big-endian NumPy dtype
_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class IDXFormatError(ValueError):
    """A file that is not a well-formed IDX file (bad magic number, type, or a size that does not match)."""


def parse_idx(data: bytes, name: str = "<bytes>", ndim: int | None = None) -> np.ndarray:
    """The array stored in the bytes of an IDX file (``name`` is for the error messages), in native byte order.

    With ``ndim``, a file with another number of dimensions is an error.

    >>> parse_idx(bytes([0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + bytes(range(6)))
    array([[0, 1, 2],
           [3, 4, 5]], dtype=uint8)
    """
    shape, dtype, header = _header(data, name, ndim)
    expected = math.prod(shape) * dtype.itemsize  # Python ints: a hostile header cannot overflow them
    found = len(data) - header
    if found != expected:
        problem = "it is truncated" if found < expected else "extra bytes follow the data"
        raise IDXFormatError(
            f"{name}: sizes {shape} of {dtype.name} need {expected} bytes of data, the file has {found} ({problem})"
        )
    array = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))  # a writable copy in native order


def _header(data: bytes, name: str, ndim: int | None) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header length) from the first bytes of an IDX file."""
    if len(data) < 4:
        raise IDXFormatError(f"{name}: {len(data)} bytes, too short for an IDX header (the file is truncated)")
    zero0, zero1, code, dims = data[:4]
    if zero0 or zero1 or code not in _TYPES:
        raise IDXFormatError(
            f"{name}: bad IDX magic number 0x{data[:4].hex()} (expected 0x0000 followed by a type "
            f"code in {sorted(hex(c) for c in _TYPES)} and the number of dimensions)"
        )
    if ndim is not None and dims != ndim:
        raise IDXFormatError(f"{name}: an IDX file of {dims} dimensions; expected {ndim}")
    header = 4 + 4 * dims
    if len(data) < header:
        raise IDXFormatError(
            f"{name}: the header of {dims} dimensions needs {header} bytes, the file has {len(data)} (it is truncated)"
        )
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=dims, offset=4))
    return shape, np.dtype(_TYPES[code]), header


def read_idx(path: str | os.PathLike, ndim: int | None = None) -> np.ndarray:
    """The array in an IDX file; a name ending in ``.gz`` is decompressed first. Errors name the file.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "labels-idx1-ubyte"
    >>> _ = path.write_bytes(bytes([0, 0, 0x08, 1, 0, 0, 0, 3, 7, 2, 1]))
    >>> read_idx(path, ndim=1)
    array([7, 2, 1], dtype=uint8)
    """
    path = Path(path)
    compressed = path.suffix == ".gz"
    # A plain file's reads stop at its end; a gzip file is held to at most MAX_EXPANSION times its size (MNIST's
    # inflate about 5 times), checked on the header's sizes before the data is inflated.
    budget = path.stat().st_size * (MAX_EXPANSION if compressed else 1)
    try:
        with gzip.open(path, "rb") if compressed else open(path, "rb") as f:
            head = f.read(4)
            head += f.read(4 * head[3]) if len(head) == 4 else b""
            shape, dtype, _ = _header(head, str(path), ndim)
            expected = math.prod(shape) * dtype.itemsize
            if expected > budget:
                holds = (
                    f"more than a gzip file of {budget // MAX_EXPANSION} bytes holds (it inflates at most "
                    f"{MAX_EXPANSION} times)"
                    if compressed
                    else f"the file has {budget - len(head)} (it is truncated)"
                )
                raise IDXFormatError(f"{path}: sizes {shape} of {dtype.name} need {expected} bytes of data, {holds}")
            data = f.read(expected)
            extra = _drain(f, budget) if len(data) == expected else 0
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise IDXFormatError(f"{path}: cannot decompress: {e} (the file is truncated or corrupt)") from e
    return parse_idx(head + data + bytes(extra), str(path), ndim)


def _drain(f, budget: int) -> int:
    """How many bytes are left in ``f`` (up to ``budget``), read in chunks and dropped."""
    left = 0
    while left <= budget and (chunk := f.read(1 << 20)):
        left += len(chunk)
    return min(left, budget + 1)
