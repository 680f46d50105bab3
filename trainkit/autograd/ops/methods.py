"""Tensor's op methods and operators.

They are attached here, after all op modules exist, so that ``tensor.py`` holds only what a tensor *is* and each op
module stays free of the Tensor class body. Every function an op module lists in ``__all__`` becomes the method of
the same name, with the tensor first (but the few that PyTorch has as functions only); the operators, the in-place
forms and a few methods that take their arguments otherwise are listed below, each naming such a function.
"""

from __future__ import annotations

from .. import api, creation
from ..backend import kind_of, xp_of
from ..tensor import Tensor
from . import (
    activation,
    copy,
    cumulative,
    einsum,
    elementwise,
    gather_scatter,
    linalg,
    masking,
    math,
    more_math,
    no_gradient,
    norm,
    rearrange,
    reduction,
    sampling,
    shape,
    sorting,
    triangular,
    trigonometric,
)
from .inplace import apply_inplace, arithmetic_inplace, function_inplace, setitem


def _reflected(fn):
    def method(self, other):
        return fn(other, self)

    return method


def _dims_method(fn):
    """``x.permute(1, 0)`` and ``x.permute((1, 0))`` alike."""

    def method(self, *dims):
        return fn(self, *dims)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _T(self):
    return shape.permute(self, *reversed(range(self.ndim)))


def _mT(self):
    return shape.matrix_transpose(self)


def _inplace(cls, doc: str, fn=None):
    def method(self, *args, **kwargs):
        if fn is not None and kind_of(self._data.dtype) not in "fc":
            return function_inplace(self, fn, *args, **kwargs)  # the function decides the result type, and the error
        return apply_inplace(self, cls, *args, **kwargs)

    method.__doc__ = doc
    return method


def _clamp_(self, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return function_inplace(self, math.clamp, min, max)
    return apply_inplace(self, math.Clamp, lo=min, hi=max)


def _function_inplace(fn, doc: str):
    """The in-place method of function ``fn``: its result, promoted as ``fn`` promotes, written into self."""

    def method(self, *args, **kwargs):
        return function_inplace(self, fn, *args, **kwargs)

    method.__doc__ = doc
    return method


# In-place forms of functions: name_ writes fn(self, ...) into self (the node is fn's)
_FUNCTION_INPLACE = {
    "clamp_min_": math.clamp_min,
    "clamp_max_": math.clamp_max,
    "remainder_": math.remainder,
    "fmod_": elementwise.fmod,
    "floor_divide_": math.floor_divide,
    "masked_fill_": masking.masked_fill,
    "sign_": math.sign,
    "reciprocal_": math.reciprocal,
    "square_": elementwise.square,
    "lerp_": elementwise.lerp,
    "addcmul_": elementwise.addcmul,
    "addcdiv_": elementwise.addcdiv,
    "floor_": elementwise.floor,
    "ceil_": elementwise.ceil,
    "trunc_": elementwise.trunc,
    "round_": elementwise.round,
    "frac_": elementwise.frac,
    "rsqrt_": elementwise.rsqrt,
    "exp2_": elementwise.exp2,
    "expm1_": elementwise.expm1,
    "log2_": elementwise.log2,
    "log10_": elementwise.log10,
    "log1p_": elementwise.log1p,
    "erf_": elementwise.erf,
    "sin_": trigonometric.sin,
    "cos_": trigonometric.cos,
    "tan_": trigonometric.tan,
    "asin_": trigonometric.asin,
    "acos_": trigonometric.acos,
    "atan_": trigonometric.atan,
    "sinh_": trigonometric.sinh,
    "cosh_": trigonometric.cosh,
    "atan2_": trigonometric.atan2,
    "bitwise_and_": no_gradient.bitwise_and,
    "bitwise_or_": no_gradient.bitwise_or,
    "bitwise_xor_": no_gradient.bitwise_xor,
    "bitwise_not_": no_gradient.bitwise_not,
    "logical_not_": no_gradient.logical_not,
    "__imod__": math.remainder,
    "__ifloordiv__": math.floor_divide,
    "__iand__": no_gradient.bitwise_and,
    "__ior__": no_gradient.bitwise_or,
    "__ixor__": no_gradient.bitwise_xor,
    "__ilshift__": no_gradient.bitwise_left_shift,
    "__irshift__": no_gradient.bitwise_right_shift,
    **{f"{name}_": getattr(more_math, name) for name in more_math.__all__ if name not in ("positive", "signbit")},
}


def _pow_(self, exponent):
    """Raise to ``exponent`` (a number or a tensor) in place."""
    if isinstance(exponent, Tensor):
        return function_inplace(self, math.pow, exponent)
    if kind_of(self._data.dtype) != "f" and type(exponent) is int and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return apply_inplace(self, math.Pow, p=exponent)


def _fill_(self, value):
    return apply_inplace(self, copy.FillTensor if isinstance(value, Tensor) else copy.Fill, value)


def _copy_(self, src, non_blocking: bool = False):
    """Copy ``src`` (broadcast and cast as needed, from any device) into self."""
    if not isinstance(src, Tensor):
        src = Tensor._make(xp_of(self._data).asarray(src))
    elif type(src._data) is not type(self._data):
        src = src.to(self.device)
    return apply_inplace(self, copy.Copy, src)


def _zero_(self):
    return apply_inplace(self, copy.Zero, 0)


# The modules whose ``__all__`` functions are Tensor methods, and the functions PyTorch has as functions only.
_MODULES = (
    math,
    activation,
    reduction,
    linalg,
    shape,
    copy,
    sampling,
    elementwise,
    trigonometric,
    more_math,
    gather_scatter,
    masking,
    rearrange,
    triangular,
    sorting,
    cumulative,
    norm,
    einsum,
)
_FUNCTIONS_ONLY = {
    "cat",
    "concat",
    "concatenate",
    "einsum",
    "hstack",
    "rsub",
    "stack",
    "std_mean",
    "var_mean",
    "vstack",
}
_METHODS = {
    name: getattr(module, name) for module in _MODULES for name in module.__all__ if name not in _FUNCTIONS_ONLY
}

_METHODS.update(
    {
        # arithmetic and comparison operators
        "__add__": math.add,
        "__radd__": _reflected(math.add),
        "__sub__": math.sub,
        "__rsub__": math.rsub,
        "__mul__": math.mul,
        "__rmul__": _reflected(math.mul),
        "__truediv__": math.div,
        "__rtruediv__": math.rtruediv,
        "__floordiv__": math.floor_divide,
        "__rfloordiv__": _reflected(math.floor_divide),
        "__mod__": math.remainder,
        "__rmod__": _reflected(math.remainder),
        "__pow__": math.pow,
        "__rpow__": _reflected(math.pow),
        "__matmul__": linalg.matmul,
        "__rmatmul__": _reflected(linalg.matmul),
        "__neg__": math.neg,
        "__pos__": no_gradient.positive,
        "__abs__": math.abs,
        "__eq__": math.eq,
        "__ne__": math.ne,
        "__lt__": math.lt,
        "__le__": math.le,
        "__gt__": math.gt,
        "__ge__": math.ge,
        "__and__": no_gradient.bitwise_and,
        "__or__": no_gradient.bitwise_or,
        "__xor__": no_gradient.bitwise_xor,
        "__rand__": _reflected(no_gradient.bitwise_and),
        "__ror__": _reflected(no_gradient.bitwise_or),
        "__rxor__": _reflected(no_gradient.bitwise_xor),
        "__lshift__": no_gradient.bitwise_left_shift,
        "__rshift__": no_gradient.bitwise_right_shift,
        "__invert__": no_gradient.invert,
        "__getitem__": shape.getitem,
        "__setitem__": setitem,
        "__iadd__": lambda self, other: arithmetic_inplace(self, "add", other),
        "__isub__": lambda self, other: arithmetic_inplace(self, "sub", other),
        "__imul__": lambda self, other: arithmetic_inplace(self, "mul", other),
        "__itruediv__": lambda self, other: arithmetic_inplace(self, "div", other),
        # methods that take their arguments otherwise than the function of their name
        "where": lambda self, cond, other: math.where(cond, self, other),
        "permute": _dims_method(shape.permute),
        "T": property(_T),
        "mT": property(_mT),
        # in place
        "add_": lambda self, other, *, alpha=1: arithmetic_inplace(self, "add", other, alpha),
        "sub_": lambda self, other, *, alpha=1: arithmetic_inplace(self, "sub", other, alpha),
        "mul_": lambda self, other: arithmetic_inplace(self, "mul", other),
        "div_": lambda self, other, *, rounding_mode=math.ROUNDING_NOT_GIVEN: arithmetic_inplace(
            self, "div", other, rounding_mode=rounding_mode
        ),
        "clamp_": _clamp_,
        "clip_": _clamp_,
        "fill_": _fill_,
        "zero_": _zero_,
        "copy_": _copy_,
        "neg_": _inplace(math.Neg, "Negate in place."),
        "exp_": _inplace(math.Exp, "Exponentiate in place.", math.exp),
        "log_": _inplace(math.Log, "Natural logarithm in place.", math.log),
        "sqrt_": _inplace(math.Sqrt, "Square root in place.", math.sqrt),
        "abs_": _inplace(math.Abs, "Absolute value in place."),
        "pow_": _pow_,
        "__ipow__": _pow_,
        "relu_": _inplace(activation.Relu, "ReLU in place.", activation.relu),
        "sigmoid_": _inplace(activation.Sigmoid, "Sigmoid in place.", activation.sigmoid),
        "tanh_": _inplace(activation.Tanh, "tanh in place.", activation.tanh),
    }
)
_METHODS.update({name: _function_inplace(fn, f"``{name[:-1]}`` in place.") for name, fn in _FUNCTION_INPLACE.items()})
# the in-place inverse hyperbolic functions have a node of their own in PyTorch (with no derivative)
for _names, _cls, _fn in (
    (("asinh_", "arcsinh_"), more_math.AsinhInplace, more_math.asinh),
    (("acosh_", "arccosh_"), more_math.AcoshInplace, more_math.acosh),
    (("atanh_", "arctanh_"), more_math.AtanhInplace, more_math.atanh),
):
    for _name in _names:
        _METHODS[_name] = _inplace(_cls, f"``{_name[:-1]}`` in place (PyTorch defines no derivative for it).", _fn)

for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

# Methods that need modules above tensor.py: the engine's entry, conversions and factories.
Tensor.backward = api.tensor_backward
Tensor.new_tensor = creation.new_tensor
