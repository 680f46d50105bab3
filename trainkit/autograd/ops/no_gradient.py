"""The tensor functions that have no gradient: comparisons, logical and bitwise ops, ``all``/``any`` and the tests
of values (isnan, isfinite, isclose, allclose, equal), and ``positive``. Their results never require grad.
"""

from __future__ import annotations

import numpy as np

from ..backend import result_type, xp_of
from ..function import shape_error
from ..tensor import Tensor
from .kernels import not_implemented
from .operands import operand_arrays, tensors_only
from .type_names import scalar_name

__all__ = [
    "all",
    "allclose",
    "any",
    "bitwise_and",
    "bitwise_left_shift",
    "bitwise_not",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "eq",
    "equal",
    "ge",
    "gt",
    "invert",
    "isclose",
    "isfinite",
    "isnan",
    "le",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "lt",
    "ne",
    "positive",
]


def _compare(ufunc_name: str, tensors_only_name: str = "", name: str = ""):
    def compare(input, other) -> Tensor:
        if tensors_only_name:
            tensors_only(tensors_only_name, input, other)
        elif not isinstance(input, Tensor):
            raise TypeError(
                f"{compare.__name__}() received an invalid combination of arguments - got "
                f"({type(input).__name__}, {type(other).__name__}), but expected one of: (Tensor input, "
                f"Tensor other) or (Tensor input, Number other); put the tensor first"
            )
        da, db, xp = operand_arrays(input, other)
        try:
            return Tensor._make(xp.asarray(getattr(xp, ufunc_name)(da, db)))
        except ValueError as err:  # shapes that do not broadcast: PyTorch's RuntimeError, naming both
            raise shape_error(compare.__name__, (da, db), err) from None

    compare.__name__ = tensors_only_name or name
    compare.__doc__ = f"Element-wise ``{ufunc_name}`` as a bool tensor (no gradient)."
    return compare


eq = _compare("equal", name="eq")
ne = _compare("not_equal", name="ne")
lt = _compare("less", name="lt")
le = _compare("less_equal", name="le")
gt = _compare("greater", name="gt")
ge = _compare("greater_equal", name="ge")
logical_and = _compare("logical_and", "logical_and")
logical_or = _compare("logical_or", "logical_or")
logical_xor = _compare("logical_xor", "logical_xor")


def positive(input) -> Tensor:
    """``+x``: ``input`` itself, refused for bool tensors as in PyTorch.

    >>> import trainkit
    >>> t = trainkit.ones(2)
    >>> +t is t
    True
    """
    if input._data.dtype.kind == "b":
        raise RuntimeError(
            "The `+` operator, on a bool tensor is not supported. Convert the tensor first, for "
            "example with .int(), or leave the `+` out."
        )
    return input


def logical_not(input) -> Tensor:
    """True where an element is zero (no gradient)."""
    return Tensor._make(xp_of(input._data).logical_not(input._data))


def _bitwise(name: str, ufunc_name: str):
    def bitwise(input, other) -> Tensor:
        da, db, xp = operand_arrays(input, other)
        try:  # PyTorch checks the shapes before it looks for a kernel of the dtype
            np.broadcast_shapes(np.shape(da), np.shape(db))
        except ValueError as err:
            raise shape_error(name, (da, db), err) from None
        target = result_type(da, db)
        if target.kind not in "biu" or target.kind == "b" and name in ("lshift", "rshift"):
            raise not_implemented(f"{name}_cpu", target)
        if hasattr(da, "dtype") and da.dtype != target:
            da = da.astype(target)
        if hasattr(db, "dtype") and db.dtype != target:
            db = db.astype(target)
        return Tensor._make(xp.asarray(getattr(xp, ufunc_name)(da, db)).astype(target, copy=False))

    bitwise.__name__ = name
    bitwise.__doc__ = f"Element-wise ``{ufunc_name}`` of integer or bool tensors, in their promoted dtype."
    return bitwise


bitwise_and = _bitwise("bitwise_and", "bitwise_and")
bitwise_or = _bitwise("bitwise_or", "bitwise_or")
bitwise_xor = _bitwise("bitwise_xor", "bitwise_xor")
bitwise_left_shift = _bitwise("lshift", "left_shift")
bitwise_right_shift = _bitwise("rshift", "right_shift")


def bitwise_not(input) -> Tensor:
    """``~x``: the bitwise complement of integers, the logical not of bools."""
    data = input._data
    if data.dtype.kind not in "biu":
        raise not_implemented("bitwise_not_cpu", data.dtype)
    return Tensor._make(xp_of(data).invert(data))


def invert(input) -> Tensor:
    """The ``~`` operator: ``bitwise_not``, a TypeError for floating tensors as in PyTorch."""
    if input._data.dtype.kind not in "biu":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return bitwise_not(input)


def _truth_reduce(name: str, input, dim, keepdim: bool, axis) -> Tensor:
    """``all``/``any`` over ``dim`` (an int, a sequence of them, or None for every element), as torch: ``dim=[]``
    takes each element on its own, a 0-d tensor accepts dims 0 and -1, uint8 stays uint8."""
    a = input._data
    xp = xp_of(a)
    dim = axis if axis is not None else dim
    if dim is None:
        out = getattr(a, name)()
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        rank = max(a.ndim, 1)
        for d in dims:
            if not -rank <= d < rank:
                raise IndexError(
                    f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {d})"
                )
        seen = [d % rank for d in dims]
        if len(set(seen)) < len(seen):
            raise RuntimeError(
                f"dim {next(d for d in seen if seen.count(d) > 1)} appears multiple times in the "
                "list of dims: name each dimension once"
            )
        if not dims or a.ndim == 0:
            out = a.astype(bool)
        else:
            out = getattr(a, name)(axis=tuple(d % a.ndim for d in dims), keepdims=keepdim)
    out = xp.asarray(out)
    return Tensor._make(out.astype(a.dtype) if a.dtype == xp.uint8 else out)


def all(input, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """True where every element (over ``dim``, or all of them) is non-zero.

    >>> import trainkit
    >>> trainkit.all(trainkit.tensor([[1.0, 0.0], [2.0, 3.0]]), dim=1)
    tensor([False,  True])
    """
    return _truth_reduce("all", input, dim, keepdim, axis)


def any(input, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """True where some element (over ``dim``, or all of them) is non-zero.

    >>> import trainkit
    >>> trainkit.any(trainkit.tensor([[1.0, 0.0], [0.0, 0.0]]), dim=(0, 1))
    tensor(True)
    """
    return _truth_reduce("any", input, dim, keepdim, axis)


def isnan(input) -> Tensor:
    """True where an element is NaN (no gradient)."""
    return Tensor._make(xp_of(input._data).isnan(input._data))


def isfinite(input) -> Tensor:
    """True where an element is neither infinite nor NaN (no gradient)."""
    return Tensor._make(xp_of(input._data).isfinite(input._data))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tensor:
    """True where ``|input - other| <= atol + rtol * |other|`` element-wise (no gradient); both tensors of one dtype.

    >>> import trainkit
    >>> trainkit.isclose(trainkit.tensor([1.0, 2.0]), trainkit.tensor([1.0 + 1e-9, 2.1]))
    tensor([ True, False])
    """
    tensors_only("isclose", input, other)
    da, db = input._data, other._data
    if da.dtype != db.dtype:
        raise RuntimeError(
            f"{scalar_name(da.dtype)} did not match {scalar_name(db.dtype)}: convert one tensor "
            f"to the other's dtype first"
        )
    xp = xp_of(da)
    try:
        return Tensor._make(xp.asarray(xp.isclose(da, db, rtol=rtol, atol=atol, equal_nan=equal_nan)))
    except ValueError as err:  # shapes that do not broadcast
        raise shape_error("isclose", (da, db), err) from None


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """True when every element of ``input`` is close to ``other``'s (see ``isclose``).

    >>> import trainkit
    >>> trainkit.allclose(trainkit.tensor([1.0, 2.0]), trainkit.tensor([1.0, 2.0 + 1e-7]))
    True
    """
    return bool(isclose(input, other, rtol, atol, equal_nan)._data.all())


def equal(input, other) -> bool:
    """True when both tensors have the same shape and elements."""
    return input.shape == other.shape and bool((input._data == other._data).all())
