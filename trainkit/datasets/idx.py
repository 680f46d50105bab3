"""The IDX file format of MNIST and its relatives (http://yann.lecun.com/exdb/mnist/), plain or gzip-compressed.

An IDX file is a 4-byte magic number (two zero bytes, a type code, the number of dimensions), one big-endian
32-bit size per dimension, then the values in C order, big-endian.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import numpy as np

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
    dtype = np.dtype(_TYPES[code])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    found = len(data) - header
    if found != expected:
        problem = "it is truncated" if found < expected else "extra bytes follow the data"
        raise IDXFormatError(
            f"{name}: sizes {shape} of {dtype.name} need {expected} bytes of data, the file has {found} ({problem})"
        )
    array = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))  # a writable copy in native order


def read_idx(path: str | os.PathLike, ndim: int | None = None) -> np.ndarray:
    """The array in an IDX file; a name ending in ``.gz`` is decompressed first. Errors name the file.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "labels-idx1-ubyte"
    >>> _ = path.write_bytes(bytes([0, 0, 0x08, 1, 0, 0, 0, 3, 7, 2, 1]))
    >>> read_idx(path, ndim=1)
    array([7, 2, 1], dtype=uint8)
    """
    path = Path(path)
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise IDXFormatError(f"{path}: cannot decompress: {e} (the file is truncated or corrupt)") from e
    return parse_idx(data, str(path), ndim)
