"""Array kernels (NumPy or CuPy, no autograd) that NumPy lacks, or where PyTorch's values differ from NumPy's: the
sign, the remainder and rounded division, integer powers, lerp, a sigmoid that never overflows, erfc; and PyTorch's
dtype errors for them. The forward formulas of ``ops.table`` call them.
"""

from __future__ import annotations

import math

import numpy as np

from ..backend import kind_of, xp_of
from .type_names import scalar_name

__all__ = [
    "absolute",
    "check_int_divisor",
    "erfc",
    "int_power",
    "lerp",
    "negative",
    "not_implemented",
    "quiet",
    "quiet_all",
    "remainder",
    "rounded_divide",
    "sigmoid",
    "sign",
]


def not_implemented(kernel: str, dtype) -> NotImplementedError:
    """PyTorch's error for a kernel that has no version for ``dtype``: '"abs_cpu" not implemented for 'Bool''."""
    return NotImplementedError(f"\"{kernel}\" not implemented for '{scalar_name(dtype)}'")


def check_int_divisor(b) -> None:
    """An integer division or remainder by zero is an error in PyTorch (NumPy gives 0 with a warning)."""
    zero = b.dtype.kind in "biu" and not b.all() if hasattr(b, "dtype") else type(b) in (int, bool) and b == 0
    if zero:
        raise RuntimeError("ZeroDivisionError")


def sign(x):
    """-1, 0 or 1 in x's dtype; 0 for NaN and for both zeros (NumPy gives NaN and keeps -0.0), bool stays bool."""
    if x.dtype.kind == "b":
        return x.copy()
    xp = xp_of(x)
    return xp.subtract(x > 0, x < 0, dtype=x.dtype)


def remainder(a, b):
    """Python's remainder (the sign of ``b``), as PyTorch computes it: for floats, C's fmod moved by ``b`` where the
    signs differ, which keeps fmod's signed zeros (NumPy's remainder returns +0.0 where PyTorch gives -0.0)."""
    xp = xp_of(a if hasattr(a, "dtype") else b)
    _no_bool("remainder_cpu", a, b)
    if not _is_float(a, b):
        check_int_divisor(b)
        return xp.remainder(a, b)
    with quiet(xp):
        mod = xp.fmod(a, b)
        shift = (mod != 0) & ((xp.asarray(b) < 0) != (mod < 0))
        return xp.where(shift, mod + b, mod).astype(mod.dtype, copy=False)


def rounded_divide(a, b, mode: str):
    """``a / b`` rounded toward minus infinity (``'floor'``) or zero (``'trunc'``), exact for integers."""
    xp = xp_of(a if hasattr(a, "dtype") else b)
    _no_bool(f"div_{mode}_cpu", a, b)
    if not _is_float(a, b):
        check_int_divisor(b)
        q = xp.floor_divide(a, b)
        if mode == "trunc":  # floor and trunc differ where the quotient is negative and not exact
            q = q + ((q < 0) & (q * b != a))
        return q
    with quiet(xp):
        return xp.floor_divide(a, b) if mode == "floor" else xp.trunc(xp.true_divide(a, b))


def int_power(base, exponent):
    """Integer ``base ** exponent`` with PyTorch's rule for negative exponents: 1 and -1 keep their powers, every
    other base gives 0 (NumPy raises)."""
    xp = xp_of(base)
    negative = exponent < 0
    if not negative.any():
        return base**exponent
    out = base ** xp.where(negative, 0, exponent)
    odd = (exponent % 2).astype(bool)
    small = xp.where(base == 1, 1, xp.where(base == -1, xp.where(odd, -1, 1), 0))
    return xp.where(negative, small, out).astype(out.dtype, copy=False)


def lerp(x, end, weight):
    """``x + weight (end - x)`` as PyTorch evaluates it: ``end - (end - x)(1 - weight)`` for weights of magnitude 0.5
    and more, so that infinities give NaN exactly where PyTorch's do."""
    xp = xp_of(x)
    diff = end - x
    with quiet(xp):
        low = x + weight * diff
        high = end - diff * (1 - weight)
    return xp.where(xp.abs(weight) < 0.5, low, high).astype(low.dtype, copy=False)


def _no_bool(kernel: str, a, b) -> None:
    """Operands promoted to bool have no kernel in PyTorch (an array operand carries the promoted dtype)."""
    for v in (a, b):
        if hasattr(v, "dtype") and v.dtype.kind == "b":
            raise not_implemented(kernel, v.dtype)


def _is_float(a, b) -> bool:
    return (kind_of(a.dtype) if hasattr(a, "dtype") else "f" if isinstance(a, float) else "i") == "f" or (
        kind_of(b.dtype) if hasattr(b, "dtype") else "f" if isinstance(b, float) else "i"
    ) == "f"


def quiet(xp):
    """NumPy's warnings on division by zero and invalid values silenced (CuPy has none)."""
    return xp.errstate(divide="ignore", invalid="ignore") if hasattr(xp, "errstate") else _NoErrstate()


class _NoErrstate:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def quiet_all(xp):
    """NumPy's warnings silenced, overflow too: for functions that reach inf and NaN at the ends of their domains."""
    return xp.errstate(all="ignore") if hasattr(xp, "errstate") else _NoErrstate()


def negative(x):
    """``-x``; a bool array is PyTorch's error (NumPy's is a TypeError)."""
    try:
        return -x
    except TypeError:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead."
        ) from None


def absolute(x):
    """``|x|``; PyTorch has no kernel for bool."""
    if x.dtype.kind == "b":
        raise not_implemented("abs_cpu", x.dtype)
    return xp_of(x).abs(x)


def sigmoid(x):
    """``1 / (1 + e^-x)`` without overflow: e^-|x| is at most 1."""
    xp = xp_of(x)
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


# math.erfc element by element: 1 - erf(x) would lose every digit of the tail (erfc(10) = 2e-45)
_ERFC = np.frompyfunc(math.erfc, 1, 1)


def erfc(x):
    """The complementary error function, computed in float64 on the host and returned in x's dtype."""
    host = np.asarray(x.get() if hasattr(x, "get") else x, dtype=np.float64)
    return xp_of(x).asarray(np.asarray(_ERFC(host), dtype=np.float64), dtype=x.dtype)
