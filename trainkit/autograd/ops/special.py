"""Array kernels (NumPy or CuPy, no autograd) that NumPy lacks, or where PyTorch's values differ from NumPy's:
erf, the sign, the remainder and rounded division, integer powers, lerp; and PyTorch's dtype errors for them.
Also the tensor functions that have no gradient (comparisons, logical and bitwise ops, tests of values), and the
ops with PyTorch's special rules: clamp, maximum and minimum (gradients split at ties and bounds), rounded
division and remainder, and the node of an op PyTorch gives no derivative.
"""

from __future__ import annotations

import numpy as np

from ..backend import result_type, xp_of
from ..function import Op, device_error, shape_error
from ..tensor import Tensor
from . import dual
from .type_names import scalar_name

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


def _arrays(input, other):
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


def zeros_grad(g):
    """The zero gradient of a step function: zeros even where ``g`` is infinite or NaN (PyTorch's zeros_like)."""
    return g * 0 if isinstance(g, Tensor) else xp_of(g).zeros_like(g)


def _compare(ufunc_name: str, tensors_only_name: str = "", name: str = ""):
    def compare(input, other) -> Tensor:
        if tensors_only_name:
            tensors_only(tensors_only_name, input, other)
        elif not isinstance(input, Tensor):
            raise TypeError(f"{compare.__name__}() received an invalid combination of arguments - got "
                            f"({type(input).__name__}, {type(other).__name__}), but expected one of: (Tensor input, "
                            f"Tensor other) or (Tensor input, Number other); put the tensor first")
        da, db, xp = _arrays(input, other)
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
        raise RuntimeError("The `+` operator, on a bool tensor is not supported. Convert the tensor first, for "
                           "example with .int(), or leave the `+` out.")
    return input


def logical_not(input) -> Tensor:
    """True where an element is zero (no gradient)."""
    return Tensor._make(xp_of(input._data).logical_not(input._data))


def _bitwise(name: str, ufunc_name: str):
    def bitwise(input, other) -> Tensor:
        da, db, xp = _arrays(input, other)
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
                raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but "
                                 f"got {d})")
        seen = [d % rank for d in dims]
        if len(set(seen)) < len(seen):
            raise RuntimeError(f"dim {next(d for d in seen if seen.count(d) > 1)} appears multiple times in the "
                               "list of dims: name each dimension once")
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
        raise RuntimeError(f"{scalar_name(da.dtype)} did not match {scalar_name(db.dtype)}: convert one tensor "
                           f"to the other's dtype first")
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


def not_implemented(kernel: str, dtype) -> NotImplementedError:
    """PyTorch's error for a kernel that has no version for ``dtype``: '"abs_cpu" not implemented for 'Bool''."""
    return NotImplementedError(f'"{kernel}" not implemented for \'{scalar_name(dtype)}\'')


def checked_alpha(input, other, alpha):
    """``alpha`` as add and sub use it, after PyTorch's checks against the dtype of the result."""
    a, b = operand(input), operand(other)
    kind = result_type(a._data if isinstance(a, Tensor) else a, b._data if isinstance(b, Tensor) else b).kind
    if kind in "biu" and isinstance(alpha, float):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number. "
                           "Pass an int alpha, or cast the tensors to a floating dtype first.")
    if isinstance(alpha, bool) and kind != "b":
        raise RuntimeError("Boolean alpha only supported for Boolean results. Pass alpha as a number instead.")
    return bool(alpha) if kind == "b" else alpha  # bool tensors stay bool: alpha only says whether to add


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


# ------------------------------------------------------------ ops whose gradients split at ties and at the bounds
class DivRounding(Op, name="DivBackward2"):
    """out = x / y rounded toward minus infinity or zero.   dx = 0,  dy = 0 (a step function)."""

    def forward(self, x, y, mode):
        return rounded_divide(x, y, mode)

    def backward(self, g):
        z = zeros_grad(g)
        return z, z


class NotDifferentiable(Op, name="NotImplemented"):
    """An op PyTorch records without a derivative (floor_divide, remainder of a number by a tensor): the output
    requires grad, and backward through it is an error."""

    def forward(self, x, y, fn, aten):
        self.aten = aten
        return fn(x, y)

    def name(self) -> str:
        return "torch::autograd::NotImplemented"

    def backward(self, g):
        raise RuntimeError(f"derivative for aten::{self.aten} is not implemented")


class Remainder(Op, name="RemainderBackward0"):
    """out = x mod c for a number c (the sign of c).   dx = g."""

    def forward(self, x, other):
        return remainder(x, other)

    def backward(self, g):
        return g


class RemainderTensor(Op, name="RemainderBackward1"):
    """out = x mod y = x - floor(x / y) y.   dx = g,  dy = -g * floor(x / y)."""

    save_inputs = (0, 1)
    save_only_for = {0: 1, 1: 1}

    def forward(self, x, y):
        return remainder(x, y)

    def backward(self, g):
        gy = None
        if self.next_functions[1][0] is not None:
            x, y = (dual.data(v) for v in self.saved_tensors)
            gy = -g * rounded_divide(x, y, "floor")
        return (g if self.next_functions[0][0] is not None else None), gy


class Clamp(Op, name="ClampBackward1"):
    """out = min(max(x, lo), hi).   dx = g where lo <= x <= hi, else 0."""

    save_inputs = (0,)

    def forward(self, x, lo, hi):
        if x.dtype.kind == "b" and {type(b) for b in (lo, hi) if b is not None} == {bool}:  # no kernel in PyTorch
            which = "clamp" if lo is not None and hi is not None else ("clamp_max" if lo is None else "clamp_min")
            raise NotImplementedError(f'"{which}_scalar_cpu" not implemented for \'Bool\'')
        self.lo, self.hi = lo, hi
        out = xp_of(x).clip(x, lo, hi)
        return _keep_zero_sign(x, out)

    def backward(self, g):
        (x,) = self.saved_tensors
        xd = dual.data(x)
        inside = xd >= self.lo if self.lo is not None else None
        if self.hi is not None:
            inside = xd <= self.hi if inside is None else inside & (xd <= self.hi)
        return dual.keep(g, inside)


class ClampMin(Clamp, name="ClampMinBackward0"):
    pass


class ClampMax(Clamp, name="ClampMaxBackward0"):
    pass


def _keep_zero_sign(x, out):
    """PyTorch's clamp keeps x where x equals a bound: -0.0 clamped below by 0.0 stays -0.0 (NumPy gives 0.0)."""
    if x.dtype.kind != "f":
        return out
    return xp_of(x).where(out == x, x, out)


class ClampTensor(Op, name="ClampBackward0"):
    """out = min(max(x, lo), hi) for tensors lo, hi (either may be None).   dx = g where lo <= x <= hi,
    dlo = g where x < lo < hi,  dhi = g where x > hi or hi < lo (PyTorch's split when the bounds cross)."""

    save_inputs = (0, 1, 2)

    def forward(self, x, lo, hi):
        xp = xp_of(x)
        out = x if lo is None else xp.maximum(x, lo)
        out = out if hi is None else xp.minimum(out, hi)
        return _keep_zero_sign(x, out)

    def backward(self, g):
        x, lo, hi = (dual.data(v) for v in self.saved_tensors)
        if hi is None:
            return dual.keep(g, x >= lo), dual.keep(g, x < lo), None
        if lo is None:
            return dual.keep(g, x <= hi), None, dual.keep(g, x > hi)
        (fx, _), (flo, _), (fhi, _) = self.next_functions
        _check_in_place_shapes(x, lo, g.shape, fx is not None or flo is not None)
        _check_in_place_shapes(x, hi, g.shape, fhi is not None)
        return (dual.keep(g, (x >= lo) & (x <= hi)), dual.keep(g, (x < lo) & (lo < hi)),
                dual.keep(g, (x > hi) | (hi < lo)))


def _check_in_place_shapes(x, bound, shape: tuple, wanted: bool) -> None:
    """PyTorch's clamp backward combines masks in place, starting from the mask of x and one bound: it fails
    where that mask is smaller than the output (the other bound broadcasts x further)."""
    first = np.broadcast_shapes(x.shape, bound.shape)
    if wanted and first != tuple(shape):
        raise RuntimeError(f"output with shape {list(first)} doesn't match the broadcast shape {list(shape)}: the "
                           f"gradient of clamp needs x and each bound to broadcast to the output's shape; expand "
                           f"them first")


class ClampMinTensor(ClampTensor, name="ClampMinBackward1"):
    pass


class ClampMaxTensor(ClampTensor, name="ClampMaxBackward1"):
    pass


class Maximum(Op, name="MaximumBackward0"):
    """out = max(x, y).   dx = g where not x < y,  dy = g where not y < x; a tie gives each half (NaN: both g)."""

    save_inputs = (0, 1)

    def forward(self, x, y):
        return xp_of(x).maximum(x, y)

    def backward(self, g):
        x, y = (dual.data(v) for v in self.saved_tensors)
        return _split(g, x, y, x < y, x > y)


class Minimum(Op, name="MinimumBackward0"):
    """out = min(x, y).   dx = g where not x > y,  dy = g where not y > x; a tie gives each half (NaN: both g)."""

    save_inputs = (0, 1)

    def forward(self, x, y):
        return xp_of(x).minimum(x, y)

    def backward(self, g):
        x, y = (dual.data(v) for v in self.saved_tensors)
        return _split(g, x, y, x > y, x < y)


def _split(g, x, y, x_loses, y_loses):
    """PyTorch's gradients of max/min: g halved on ties, then dropped for the operand that lost."""
    tie = x == y
    if tie.any():
        g = g * (1 - 0.5 * tie.astype(dual.data(g).dtype))
    return dual.keep(g, ~x_loses), dual.keep(g, ~y_loses)


def _no_bool(kernel: str, a, b) -> None:
    """Operands promoted to bool have no kernel in PyTorch (an array operand carries the promoted dtype)."""
    for v in (a, b):
        if hasattr(v, "dtype") and v.dtype.kind == "b":
            raise not_implemented(kernel, v.dtype)


def _is_float(a, b) -> bool:
    return (a.dtype.kind if hasattr(a, "dtype") else "f" if isinstance(a, float) else "i") == "f" or (
        b.dtype.kind if hasattr(b, "dtype") else "f" if isinstance(b, float) else "i") == "f"


def quiet(xp):
    """NumPy's warnings on division by zero and invalid values silenced (CuPy has none)."""
    return xp.errstate(divide="ignore", invalid="ignore") if hasattr(xp, "errstate") else _NoErrstate()


class _NoErrstate:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
