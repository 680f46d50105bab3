"""What the op functions accept as operands: Tensors and Python numbers, PyTorch's TypeError for a function that
takes tensors only, and the checks of add's and sub's ``alpha``.
"""

from __future__ import annotations

import numpy as np

from ..backend import result_type, xp_of
from ..function import device_error
from ..tensor import Tensor

__all__ = ["checked_alpha", "operand", "operand_arrays", "tensors_only"]

_OPERANDS = (Tensor, bool, int, float)


def operand(v):
    """Tensors and Python numbers pass as they are (NumPy 2 treats numbers as weakly typed, as PyTorch does)."""
    if isinstance(v, _OPERANDS):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray) or type(v).__module__.startswith("cupy"):
        return Tensor._make(v)
    raise TypeError(f"unsupported operand type for a tensor op: {type(v).__name__}")


def operand_arrays(input, other):
    """The arrays (or numbers) of two operands, and their array module; tensors on two devices are an error."""
    a, b = operand(input), operand(other)
    da = a._data if isinstance(a, Tensor) else a
    db = b._data if isinstance(b, Tensor) else b
    if isinstance(a, Tensor) and isinstance(b, Tensor) and type(da) is not type(db):
        raise device_error((a, b))
    return da, db, xp_of(da if isinstance(a, Tensor) else db)


def tensors_only(name: str, input, other) -> None:
    """PyTorch's TypeError for a function that takes no numbers (maximum, logical_and, ...)."""
    for position, (arg, v) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(v, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be Tensor, not {type(v).__name__}")


def checked_alpha(input, other, alpha):
    """``alpha`` as add and sub use it, after PyTorch's checks against the dtype of the result."""
    a, b = operand(input), operand(other)
    kind = result_type(a._data if isinstance(a, Tensor) else a, b._data if isinstance(b, Tensor) else b).kind
    if kind in "biu" and isinstance(alpha, float):
        raise RuntimeError(
            "For integral input tensors, argument alpha must not be a floating point number. "
            "Pass an int alpha, or cast the tensors to a floating dtype first."
        )
    if isinstance(alpha, bool) and kind != "b":
        raise RuntimeError("Boolean alpha only supported for Boolean results. Pass alpha as a number instead.")
    return bool(alpha) if kind == "b" else alpha  # bool tensors stay bool: alpha only says whether to add
