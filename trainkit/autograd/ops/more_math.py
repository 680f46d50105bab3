"""More element-wise math: sgn, signbit, erfc, the inverse hyperbolic functions, deg2rad and rad2deg, logit, xlogy
and nan_to_num. Each op states its derivative in its docstring; a backward works on arrays and on Tensors alike
(``create_graph``). The ops that are one formula each way are rows of ``ops.table``.
"""

from __future__ import annotations

from ..backend import kind_of, xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual, trigonometric
from . import math as _m
from .elementwise import trunc
from .kernels import quiet_all as _quiet
from .no_gradient import positive
from .table import as_floating, elementwise

__all__ = [
    "acosh",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctanh",
    "asinh",
    "atanh",
    "deg2rad",
    "erfc",
    "fix",
    "logit",
    "nan_to_num",
    "positive",
    "rad2deg",
    "sgn",
    "signbit",
    "xlogy",
]

_SGN_DOC = """The sign of each element, -1, 0 or 1 (0 for NaN; bool stays bool), as ``sign`` for real tensors; the
    gradient is zero.

    >>> import trainkit
    >>> sgn(trainkit.tensor([-2.0, 0.0, 3.0]))
    tensor([-1.,  0.,  1.])
    """
_ERFC_DOC = """The complementary error function 1 - erf x, accurate in the tail where 1 - erf x would round to 0.

    >>> import trainkit
    >>> erfc(trainkit.tensor([0.0]))
    tensor([1.])
    """
_ASINH_DOC = """The inverse hyperbolic sine, log(x + sqrt(x^2 + 1)).

    >>> import trainkit
    >>> asinh(trainkit.zeros(2))
    tensor([0., 0.])
    """
_ACOSH_DOC = """The inverse hyperbolic cosine, log(x + sqrt(x^2 - 1)) for x >= 1 (NaN below).

    >>> import trainkit
    >>> acosh(trainkit.ones(2))
    tensor([0., 0.])
    """
_ATANH_DOC = """The inverse hyperbolic tangent, log((1 + x) / (1 - x)) / 2 for |x| <= 1 (NaN outside).

    >>> import trainkit
    >>> atanh(trainkit.zeros(2))
    tensor([0., 0.])
    """
_DEG2RAD_DOC = """Degrees to radians: x * pi / 180 (integers give floats).

    >>> import trainkit
    >>> deg2rad(trainkit.tensor([180.0]))
    tensor([3.1416])
    """
_RAD2DEG_DOC = """Radians to degrees: x * 180 / pi (integers give floats).

    >>> import trainkit
    >>> rad2deg(trainkit.tensor([3.14159265]))
    tensor([180.])
    """


# ------------------------------------------------------------------------------------------------ table rows
# x^2 overflows to inf for huge x in these gradients, and the 0 that follows is the gradient wanted: warnings off
Sgn, sgn = elementwise("sgn", "SgnBackward0", "", "sign(x)", "zeros_grad(g)", _SGN_DOC, floating=False)
Erfc, erfc = elementwise(
    "erfc", "ErfcBackward0", "x", "erfc(x)", "g * (-TWO_OVER_SQRT_PI * exp(-(x * x)))", _ERFC_DOC, quiet=("backward",)
)
Asinh, asinh = elementwise(
    "asinh", "AsinhBackward0", "x", "xp.arcsinh(x)", "g / sqrt(x * x + 1)", _ASINH_DOC, quiet=("backward",)
)
Acosh, acosh = elementwise(
    "acosh", "AcoshBackward0", "x", "xp.arccosh(x)", "g / sqrt(x * x - 1)", _ACOSH_DOC, quiet=("forward", "backward")
)
Atanh, atanh = elementwise(
    "atanh", "AtanhBackward0", "x", "xp.arctanh(x)", "g / (1 - x * x)", _ATANH_DOC, quiet=("forward", "backward")
)
Deg2Rad, deg2rad = elementwise(
    "deg2rad",
    "Deg2RadBackward0",
    "",
    "x * x.dtype.type(DEG_TO_RAD)",
    "g * DEG_TO_RAD",
    _DEG2RAD_DOC,
    quiet=("forward",),
)
Rad2Deg, rad2deg = elementwise(
    "rad2deg",
    "Rad2DegBackward0",
    "",
    "x * x.dtype.type(1 / DEG_TO_RAD)",
    "g * (1 / DEG_TO_RAD)",
    _RAD2DEG_DOC,
    quiet=("forward",),
)


class _InplaceHyperbolic:
    """The in-place forms asinh_, acosh_ and atanh_: PyTorch records them under a node of their own that has no
    derivative, so backward through one is an error."""

    def backward(self, g):
        raise NotImplementedError(f"the derivative for 'inplace version of {self.function}' is not implemented.")


class AsinhInplace(_InplaceHyperbolic, Asinh, name="AsinhBackward1"):
    """asinh_ (no derivative)."""

    function = "asinh"


class AcoshInplace(_InplaceHyperbolic, Acosh, name="AcoshBackward1"):
    """acosh_ (no derivative)."""

    function = "acosh"


class AtanhInplace(_InplaceHyperbolic, Atanh, name="AtanhBackward1"):
    """atanh_ (no derivative)."""

    function = "atanh"


class Logit(Op, name="LogitBackward0"):
    """out = log(z / (1 - z)) with z = x clamped to [eps, 1 - eps] when eps is given.
    dx = g / (x (1 - x)) inside the range; outside it, NaN without eps (x < 0 or x > 1) and 0 with eps."""

    save_inputs = (0,)

    def forward(self, x, eps=None):
        self.extra = eps
        xp = xp_of(x)
        z = x if eps is None else xp.clip(x, x.dtype.type(eps), x.dtype.type(1 - eps))
        with _quiet(xp):
            return xp.log(z / (1 - z))

    def backward(self, g):
        (x,) = self.saved_tensors
        eps = self.extra
        raw = dual.data(x)
        xp = xp_of(raw)
        with _quiet(xp):
            grad = g / (x * (1 - x))
            # PyTorch's kernel gives g * inf at both ends, whatever the sign of a zero
            ends = (raw == 0) | (raw == 1)
            if ends.any():
                grad = dual.where(ends, g * xp.inf, grad)
            if eps is None:
                outside, fill = (raw < 0) | (raw > 1), xp.nan
            else:
                outside, fill = (raw < eps) | (raw > 1 - eps), 0
        return dual.where(outside, fill, grad) if outside.any() else grad


def _xlogy(x, y):
    """x * log y, with 0 where x is 0 (unless y is NaN)."""
    xp = xp_of(x if hasattr(x, "dtype") else y)
    with _quiet(xp):
        out = x * xp.log(y)
    return xp.where((x == 0) & ~xp.isnan(y), xp.zeros_like(out), out)


def _xlogy_grad(g, x, y):
    """d/dx of x log y: xlogy(g, y), set to 0 where x = 0 and y <= 0 (PyTorch's mask, so that the limit at x = 0
    does not turn into log 0 or log of a negative)."""
    raw_g, raw_x, raw_y = dual.data(g), dual.data(x), dual.data(y)
    xp = xp_of(raw_x)
    with _quiet(xp):
        zero = ((raw_g == 0) & ~xp.isnan(raw_y)) | ((raw_x == 0) & (raw_y <= 0))
        grad = g * dual.log(y)
    return dual.where(zero, 0, grad) if zero.any() else grad


class Xlogy(Op, name="XlogyBackward0"):
    """out = x log y (0 where x = 0 and y is not NaN).   dx = g log y (0 where x = 0 and y <= 0),  dy = g x / y."""

    save_inputs = (0, 1)

    def forward(self, x, y):
        return _xlogy(x, y)

    def backward(self, g):
        x, y = self.saved_tensors
        (fx, _), (fy, _) = self.next_functions
        with _quiet(xp_of(dual.data(x))):
            dx = _xlogy_grad(g, x, y) if fx is not None else None
            dy = g * x / y if fy is not None else None
        return dx, dy


class XlogyNumberSelf(Op, name="XlogyBackward1"):
    """out = a log y for a number a.   dy = g a / y."""

    save_inputs = (0,)

    def forward(self, y, a):
        self.extra = a
        return _xlogy(y.dtype.type(a), y)

    def backward(self, g):
        (y,) = self.saved_tensors
        with _quiet(xp_of(dual.data(y))):
            return g * self.extra / y


class XlogyNumberOther(Op, name="XlogyBackward2"):
    """out = x log b for a number b.   dx = g log b (0 where x = 0 and b <= 0)."""

    save_inputs = (0,)

    def forward(self, x, b):
        self.extra = b
        return _xlogy(x, x.dtype.type(b))

    def backward(self, g):
        (x,) = self.saved_tensors
        raw = dual.data(x)
        return _xlogy_grad(g, x, xp_of(raw).full(raw.shape, self.extra, dtype=raw.dtype))


class NanToNum(Op, name="NanToNumBackward0"):
    """out = x with NaN, +inf and -inf replaced by the given numbers.   dx = g where x is finite, else 0."""

    save_inputs = (0,)

    def forward(self, x, nan=0.0, posinf=None, neginf=None):
        xp = xp_of(x)
        info = xp.finfo(x.dtype)
        out = xp.where(xp.isnan(x), x.dtype.type(nan), x)
        out = xp.where(xp.isposinf(out), x.dtype.type(info.max if posinf is None else posinf), out)
        return xp.where(xp.isneginf(out), x.dtype.type(info.min if neginf is None else neginf), out)

    def backward(self, g):
        (x,) = self.saved_tensors
        raw = dual.data(x)
        finite = xp_of(raw).isfinite(raw)
        return dual.where(finite, g, 0) if not finite.all() else g


def signbit(input) -> Tensor:
    """True where the sign bit is set: negative numbers and -0.0 (a bool tensor, no gradient).

    >>> import trainkit
    >>> signbit(trainkit.tensor([-0.0, 0.0, -1.0]))
    tensor([ True, False,  True])
    """
    a = input._data
    xp = xp_of(a)
    if kind_of(a.dtype) == "f":
        return Tensor._make(xp.signbit(a))
    if a.dtype.kind == "i":
        return Tensor._make(a < 0)
    return Tensor._make(xp.zeros(a.shape, dtype=bool))  # bool and unsigned values have no sign


def logit(input, eps=None) -> Tensor:
    """The inverse of the sigmoid, log(z / (1 - z)), with z = x clamped to [eps, 1 - eps] when ``eps`` is given.

    >>> import trainkit
    >>> logit(trainkit.tensor([0.5, 0.0]), eps=1e-6)
    tensor([  0.0000, -13.8155])
    """
    return Logit.apply(as_floating(input), eps=None if eps is None else float(eps))


def xlogy(input, other) -> Tensor:
    """x * log y, taken as 0 where x is 0 (unless y is NaN); one of the two may be a number.

    >>> import trainkit
    >>> xlogy(trainkit.tensor([0.0, 2.0]), trainkit.tensor([0.0, 1.0]))
    tensor([0., 0.])
    """
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(
            f"xlogy() received an invalid combination of arguments - got ({type(input).__name__}, "
            f"{type(other).__name__}), but expected one of:\n * (Tensor input, Tensor other, *, Tensor "
            "out = None)\n * (Number self, Tensor other, *, Tensor out = None)\n * (Tensor input, Number "
            "other, *, Tensor out = None)\n"
        )
    a, b = _m.promote(input, other, true_divide=True)
    if not isinstance(a, Tensor):
        return XlogyNumberSelf.apply(b, a=a)
    if not isinstance(b, Tensor):
        return XlogyNumberOther.apply(a, b=b)
    return Xlogy.apply(a, b)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None) -> Tensor:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and the dtype's largest and
    smallest finite values); integer and bool tensors come back as a copy.

    >>> import trainkit
    >>> nan_to_num(trainkit.tensor([float("nan"), 1.0]), nan=-1.0)
    tensor([-1.,  1.])
    """
    if kind_of(input._data.dtype) not in "fc":
        return Tensor._make(input._data.copy())
    return NanToNum.apply(input, nan=nan, posinf=posinf, neginf=neginf)


fix = trunc
# PyTorch's NumPy-style aliases of the inverse functions
arcsin, arccos, arctan = trigonometric.asin, trigonometric.acos, trigonometric.atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh
