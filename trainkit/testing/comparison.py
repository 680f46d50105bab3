"""``assert_close``: are two tensors (or numbers, or sequences and mappings of them) close, as PyTorch decides?

Element-wise, ``actual`` is close to ``expected`` when ``|actual - expected| <= atol + rtol * |expected|`` (equal
infinities are close; NaNs only with ``equal_nan``). Without ``rtol`` and ``atol`` both come from the dtype, as in
``torch.testing.assert_close``: float16 ``(1e-3, 1e-5)``, float32 ``(1.3e-6, 1e-5)``, float64 ``(1e-7, 1e-7)``,
integers and booleans ``(0, 0)`` (exact); when the dtypes differ (``check_dtype=False``) the larger of the two.
A failure raises ``AssertionError`` with PyTorch's message: the number of mismatched elements and the greatest
absolute and relative differences with their indices.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..autograd.backend import kind_of
from ..autograd.tensor import Tensor

__all__ = ["assert_close", "default_tolerances"]

# (rtol, atol) by dtype, PyTorch's table
TOLERANCES = {
    np.dtype(np.float16): (1e-3, 1e-5),
    np.dtype(np.float32): (1.3e-6, 1e-5),
    np.dtype(np.float64): (1e-7, 1e-7),
    np.dtype(np.complex64): (1.3e-6, 1e-5),
    np.dtype(np.complex128): (1e-7, 1e-7),
}
# the dtype PyTorch gives a Python number
NUMBER_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64)}


class Mismatch(Exception):
    """A failed comparison: the exception type to raise, its message, and where in nested inputs it happened."""

    def __init__(self, kind: type[Exception], message: str, where: tuple = ()):
        super().__init__(message)
        self.kind, self.message, self.where = kind, message, where

    def error(self, msg: str | Callable[[str], str] | None) -> Exception:
        """The exception for the user: PyTorch's message, the item it happened at, or ``msg`` instead."""
        if isinstance(msg, str):
            return self.kind(msg)
        text = self.message
        if self.where:
            text += "\n\nThe failure occurred for item " + "".join(str([key]) for key in self.where)
        return self.kind(msg(text) if callable(msg) else text)


def default_tolerances(*dtypes: Any) -> tuple[float, float]:
    """``(rtol, atol)`` PyTorch uses for these dtypes: the largest over them (0 for integers and booleans).

    >>> import trainkit
    >>> default_tolerances(trainkit.float32)
    (1.3e-06, 1e-05)
    >>> default_tolerances(trainkit.float32, trainkit.float64)
    (1.3e-06, 1e-05)
    """
    pairs = [TOLERANCES.get(np.dtype(numpy_dtype(d)), (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def numpy_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of a trainkit dtype (or of anything NumPy understands)."""
    name = str(dtype).rpartition(".")[2]
    return np.dtype("bool" if name == "bool" else name)


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Raises ``AssertionError`` unless ``actual`` and ``expected`` are close, as ``torch.testing.assert_close``.

    Tensors must agree in shape, and in device and dtype unless ``check_device`` / ``check_dtype`` is False;
    Python numbers in type unless ``check_dtype`` is False; sequences and mappings in length and keys, item by item.
    trainkit's tensors are always strided and compared by value, so ``check_layout`` and ``check_stride`` have no
    effect. ``msg`` replaces the message (a callable gets PyTorch's message and returns the new one).

    >>> import trainkit
    >>> assert_close(trainkit.tensor([1.0, 2.0, 3.0]), trainkit.tensor([1.0, 2.1, 3.0]))
    Traceback (most recent call last):
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 1 / 3 (33.3%)
    Greatest absolute difference: 0.09999990463256836 at index (1,) (up to 1e-05 allowed)
    Greatest relative difference: 0.04761900380253792 at index (1,) (up to 1.3e-06 allowed)
    """
    if (rtol is None) != (atol is None):
        raise ValueError(
            "Both 'rtol' and 'atol' must be either specified or omitted, "
            f"but got no {'rtol' if rtol is None else 'atol'}."
        )
    options = {
        "allow_subclasses": allow_subclasses,
        "rtol": rtol,
        "atol": atol,
        "equal_nan": equal_nan,
        "check_device": check_device,
        "check_dtype": check_dtype,
    }
    try:
        compare(actual, expected, (), options)
    except Mismatch as mismatch:
        raise mismatch.error(msg) from None


def compare(actual: Any, expected: Any, where: tuple, options: dict) -> None:
    """Compares one pair, descending into sequences and mappings; raises ``Mismatch``."""
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        if not options["allow_subclasses"] and type(actual) is not type(expected):
            raise unsupported(actual, expected, where)
        compare_tensors(actual, expected, where, options)
    elif is_number(actual) and is_number(expected):
        compare_numbers(actual, expected, where, options)
    elif isinstance(actual, Mapping) and isinstance(expected, Mapping):
        missing, additional = set(expected) - set(actual), set(actual) - set(expected)
        if missing or additional:
            raise Mismatch(
                AssertionError,
                "The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {sorted(missing, key=repr)}\n"
                f"Additional keys in the actual mapping: {sorted(additional, key=repr)}",
                where,
            )
        for key in actual:
            compare(actual[key], expected[key], (*where, key), options)
    elif is_sequence(actual) and is_sequence(expected):
        if len(actual) != len(expected):
            raise Mismatch(
                AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", where
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, (*where, i), options)
    else:
        raise unsupported(actual, expected, where)


def unsupported(actual: Any, expected: Any, where: tuple) -> Mismatch:
    """The error for inputs that cannot be compared (a tensor and a list, a NumPy array...)."""
    return Mismatch(
        TypeError,
        f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.",
        where,
    )


def is_number(value: Any) -> bool:
    """Python and NumPy numbers (booleans included)."""
    return isinstance(value, (numbers.Number, np.bool_))


def is_sequence(value: Any) -> bool:
    """Sequences other than strings."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def tolerances(options: dict, *dtypes: np.dtype) -> tuple[float, float]:
    """The user's ``(rtol, atol)``, else the dtypes' defaults."""
    if options["rtol"] is not None:
        return options["rtol"], options["atol"]
    return default_tolerances(*dtypes)


def number_dtype(value: Any) -> np.dtype:
    """The dtype PyTorch compares a number in."""
    if isinstance(value, np.generic):
        return value.dtype
    for kind, dtype in NUMBER_DTYPES.items():
        if type(value) is kind:
            return dtype
    return np.dtype(np.complex128) if isinstance(value, complex) else np.dtype(np.float64)


def compare_numbers(actual: Any, expected: Any, where: tuple, options: dict) -> None:
    """Two numbers: their types, then their values."""
    if options["check_dtype"] and type(actual) is not type(expected):
        raise Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.", where)
    rtol, atol = tolerances(options, number_dtype(actual), number_dtype(expected))
    if not scalar_close(actual, expected, rtol, atol, options["equal_nan"]):
        raise Mismatch(AssertionError, scalar_message(actual, expected, rtol, atol), where)


def scalar_close(actual: Any, expected: Any, rtol: float, atol: float, equal_nan: bool) -> bool:
    """One pair of numbers, as ``torch.isclose`` decides."""
    if actual == expected:
        return True
    if equal_nan and actual != actual and expected != expected:
        return True
    if not (np.isfinite(actual) and np.isfinite(expected)):
        return False
    return abs(actual - expected) <= atol + rtol * abs(expected)


def scalar_message(actual: Any, expected: Any, rtol: float, atol: float) -> str:
    """PyTorch's message for two numbers (or two 0-d tensors) that are not close."""
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return mismatch_message(
        "Scalars", f"Expected {expected} but got {actual}.", abs_diff, None, atol, rel_diff, None, rtol
    )


def compare_tensors(actual: Tensor, expected: Tensor, where: tuple, options: dict) -> None:
    """Two tensors: shape, device and dtype, then their values."""
    attributes = [("shape", actual.shape, expected.shape)]
    if options["check_device"]:
        attributes.append(("device", actual.device, expected.device))
    if options["check_dtype"]:
        attributes.append(("dtype", actual.dtype, expected.dtype))
    for name, a, e in attributes:
        if a != e:
            raise Mismatch(AssertionError, f"The values for attribute '{name}' do not match: {a} != {e}.", where)
    a, e = to_numpy(actual), to_numpy(expected)
    rtol, atol = tolerances(options, a.dtype, e.dtype)
    if a.dtype != e.dtype:
        common = promoted(a.dtype, e.dtype)
        a, e = a.astype(common), e.astype(common)
    matches = close(a, e, rtol, atol, options["equal_nan"])
    if matches.all():
        return
    if a.ndim == 0:
        raise Mismatch(AssertionError, scalar_message(a.item(), e.item(), rtol, atol), where)
    raise Mismatch(AssertionError, tensor_message(a, e, matches, rtol, atol), where)


def promoted(first: np.dtype, second: np.dtype) -> np.dtype:
    """PyTorch's type promotion of two tensors: a floating dtype wins over integers and booleans unchanged
    (int64 with float32 is float32, where NumPy would say float64).

    >>> promoted(np.dtype(np.int64), np.dtype(np.float32))
    dtype('float32')
    """
    floating = [d for d in (first, second) if kind_of(d) in "fc"]
    if len(floating) == 1:
        return floating[0]
    return np.result_type(first, second)


def to_numpy(tensor: Tensor) -> np.ndarray:
    """The tensor's values on the CPU, without its graph."""
    return np.asarray(tensor.detach().cpu().numpy())


def close(a: np.ndarray, e: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    """Element-wise ``torch.isclose``: equal, or both finite within ``atol + rtol * |e|``, or both NaN if asked."""
    with np.errstate(invalid="ignore", over="ignore"):
        matches = a == e
        if kind_of(a.dtype) in "fc" or rtol or atol:
            finite = np.isfinite(a) & np.isfinite(e)
            diff = np.abs(a - e) if kind_of(a.dtype) in "fc" else np.abs(a.astype(np.float64) - e.astype(np.float64))
            matches |= finite & (diff <= atol + rtol * np.abs(e))
        if equal_nan and kind_of(a.dtype) in "fc":
            matches |= np.isnan(a) & np.isnan(e)
    return matches


def tensor_message(a: np.ndarray, e: np.ndarray, matches: np.ndarray, rtol: float, atol: float) -> str:
    """PyTorch's message for tensors: mismatched elements, the greatest absolute and relative differences."""
    total, mismatched = matches.size, int(matches.size - matches.sum())
    extra = f"Mismatched elements: {mismatched} / {total} ({mismatched / total:.1%})"
    a, e, matched = a.ravel(), e.ravel(), matches.ravel()
    if kind_of(a.dtype) not in "fc":  # integers and booleans: differences in int64, as PyTorch upcasts them
        a, e = a.astype(np.int64), e.astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        abs_diff = np.abs(a - e)
        abs_diff[matched] = 0
        # an integer division is a float32 one in PyTorch (its default dtype)
        rel_diff = (abs_diff / np.abs(e)) if kind_of(a.dtype) in "fc" else abs_diff.astype(np.float32) / np.abs(e)
        rel_diff = np.asarray(rel_diff, dtype=abs_diff.dtype if kind_of(a.dtype) in "fc" else np.float32)
        rel_diff[matched] = 0
    abs_at, rel_at = int(np.argmax(abs_diff)), int(np.argmax(rel_diff))
    shape = matches.shape
    return mismatch_message(
        "Tensor-likes",
        extra,
        abs_diff[abs_at].item(),
        tuple(int(i) for i in np.unravel_index(abs_at, shape)),
        atol,
        rel_diff[rel_at].item(),
        tuple(int(i) for i in np.unravel_index(rel_at, shape)),
        rtol,
    )


def mismatch_message(
    what: str,
    extra: str,
    abs_diff: Any,
    abs_at: tuple | None,
    atol: float,
    rel_diff: Any,
    rel_at: tuple | None,
    rtol: float,
) -> str:
    """The message's layout, shared by numbers and tensors."""
    lines = [f"{what} are not {'equal' if rtol == 0 and atol == 0 else 'close'}!", "", extra]
    for kind, diff, at, tol in (("absolute", abs_diff, abs_at, atol), ("relative", rel_diff, rel_at, rtol)):
        line = (
            f"{kind.title()} difference: {diff}" if at is None else f"Greatest {kind} difference: {diff} at index {at}"
        )
        lines.append(line + (f" (up to {tol} allowed)" if tol > 0 else ""))
    return "\n".join(lines)
