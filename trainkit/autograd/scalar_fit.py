"""Whether a Python number fits the dtype of the tensor it is written into, by PyTorch's rules.

PyTorch converts a number written into a tensor (``fill_``, ``masked_fill``, ``x[i] = v``, ``scatter_`` with a
value) with a checked conversion: outside the dtype's range it refuses with ``value cannot be converted to type
uint8_t without overflow``. A float must lie inside the range as it is (255.5 does not fit uint8), inf and NaN fit
only floating dtypes, a float beyond float32's largest finite value does not fit float32, a complex number with an
imaginary part fits no real dtype, and an unsigned dtype takes a negative integer down to minus its largest value
(-1 is 255 in uint8).
"""

from __future__ import annotations

import math

import numpy as np

from .backend import dtype_of, finfo, kind_of

__all__ = ["C_TYPE_NAMES", "check_fits", "stored_value"]

C_TYPE_NAMES = {
    "float16": "c10::Half",
    "float32": "float",
    "float64": "double",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
}


def _fits(value, dtype: np.dtype) -> bool:
    if isinstance(value, (complex, np.complexfloating)):
        if value.imag != 0:
            return False
        value = value.real
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if isinstance(value, (int, np.integer)):
            low = -int(info.max) if dtype.kind == "u" else int(info.min)
            return low <= value <= int(info.max)
        return int(info.min) <= value <= int(info.max)  # False for NaN
    if kind_of(dtype) == "f":
        return not (math.isfinite(value) and abs(value) > finfo(dtype_of(dtype)).max)
    return True


def check_fits(value, dtype) -> None:
    """Raise PyTorch's RuntimeError when the number ``value`` does not fit ``dtype`` (a NumPy dtype); tensors,
    bools and bool or complex destinations pass.

    >>> check_fits(255, np.dtype("uint8"))
    >>> check_fits(300, np.dtype("uint8"))
    Traceback (most recent call last):
    RuntimeError: value cannot be converted to type uint8_t without overflow
    """
    dtype = np.dtype(dtype)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, complex, np.number)):
        return
    if dtype.kind in "bc":
        return
    if not _fits(value, dtype):
        raise RuntimeError(
            f"value cannot be converted to type {C_TYPE_NAMES.get(dtype.name, dtype.name)} without overflow"
        )


def stored_value(value, dtype):
    """``value`` checked, and as ``dtype`` stores it: a negative integer wraps around in an unsigned dtype (which
    NumPy would refuse to write).

    >>> stored_value(-1, np.dtype("uint8"))
    255
    """
    dtype = np.dtype(dtype)
    check_fits(value, dtype)
    if isinstance(value, (complex, np.complexfloating)) and dtype.kind != "c":
        return value.real  # its imaginary part is 0: check_fits refuses any other
    if dtype.kind == "u" and isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value < 0:
        return int(value) % (int(np.iinfo(dtype).max) + 1)
    return value
