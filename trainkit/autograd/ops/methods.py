"""Tensor's op methods and operators.

They are attached here, after all op modules exist, so that ``tensor.py`` holds only what a tensor *is* and each op
module stays free of the Tensor class body. Every method is the function of the same name with the tensor first.
"""

from __future__ import annotations

from .. import api, creation
from ..backend import xp_of
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
    norm,
    rearrange,
    reduction,
    sampling,
    shape,
    sorting,
    special,
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
        if fn is not None and self._data.dtype.kind not in "fc":
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
    "clamp_min_": math.clamp_min, "clamp_max_": math.clamp_max, "remainder_": math.remainder, "fmod_": elementwise.fmod,
    "floor_divide_": math.floor_divide, "sign_": math.sign, "reciprocal_": math.reciprocal,
    "square_": elementwise.square,
    "lerp_": elementwise.lerp, "addcmul_": elementwise.addcmul, "addcdiv_": elementwise.addcdiv,
    "floor_": elementwise.floor, "ceil_": elementwise.ceil, "trunc_": elementwise.trunc, "round_": elementwise.round,
    "frac_": elementwise.frac, "rsqrt_": elementwise.rsqrt, "exp2_": elementwise.exp2, "expm1_": elementwise.expm1,
    "log2_": elementwise.log2, "log10_": elementwise.log10, "log1p_": elementwise.log1p, "erf_": elementwise.erf,
    "sin_": trigonometric.sin, "cos_": trigonometric.cos, "tan_": trigonometric.tan, "asin_": trigonometric.asin,
    "acos_": trigonometric.acos, "atan_": trigonometric.atan, "sinh_": trigonometric.sinh,
    "cosh_": trigonometric.cosh, "atan2_": trigonometric.atan2, "bitwise_and_": special.bitwise_and,
    "bitwise_or_": special.bitwise_or, "bitwise_xor_": special.bitwise_xor, "bitwise_not_": special.bitwise_not,
    "logical_not_": special.logical_not, "__imod__": math.remainder, "__ifloordiv__": math.floor_divide,
    "__iand__": special.bitwise_and, "__ior__": special.bitwise_or, "__ixor__": special.bitwise_xor,
    "__ilshift__": special.bitwise_left_shift, "__irshift__": special.bitwise_right_shift,
    **{f"{name}_": getattr(more_math, name) for name in more_math.__all__ if name not in ("positive", "signbit")},
}


def _pow_(self, exponent):
    """Raise to ``exponent`` (a number or a tensor) in place."""
    if isinstance(exponent, Tensor):
        return function_inplace(self, math.pow, exponent)
    if self._data.dtype.kind != "f" and type(exponent) is int and exponent < 0:
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


_METHODS = {
    # arithmetic and comparison operators
    "__add__": math.add, "__radd__": _reflected(math.add),
    "__sub__": math.sub, "__rsub__": math.rsub,
    "__mul__": math.mul, "__rmul__": _reflected(math.mul),
    "__truediv__": math.div, "__rtruediv__": math.rtruediv,
    "__floordiv__": math.floor_divide, "__rfloordiv__": _reflected(math.floor_divide),
    "__mod__": math.remainder, "__rmod__": _reflected(math.remainder),
    "__pow__": math.pow, "__rpow__": _reflected(math.pow),
    "__matmul__": linalg.matmul, "__rmatmul__": _reflected(linalg.matmul),
    "__neg__": math.neg, "__pos__": special.positive, "__abs__": math.abs,
    "__eq__": math.eq, "__ne__": math.ne, "__lt__": math.lt, "__le__": math.le, "__gt__": math.gt,
    "__ge__": math.ge, "__and__": special.bitwise_and, "__or__": special.bitwise_or, "__xor__": special.bitwise_xor,
    "__rand__": _reflected(special.bitwise_and), "__ror__": _reflected(special.bitwise_or),
    "__rxor__": _reflected(special.bitwise_xor), "__lshift__": special.bitwise_left_shift,
    "__rshift__": special.bitwise_right_shift, "__invert__": special.invert,
    "__getitem__": shape.getitem, "__setitem__": setitem,
    "__iadd__": lambda self, other: arithmetic_inplace(self, "add", other),
    "__isub__": lambda self, other: arithmetic_inplace(self, "sub", other),
    "__imul__": lambda self, other: arithmetic_inplace(self, "mul", other),
    "__itruediv__": lambda self, other: arithmetic_inplace(self, "div", other),
    # element-wise math
    "add": math.add, "sub": math.sub, "subtract": math.sub, "mul": math.mul, "multiply": math.mul,
    "div": math.div, "divide": math.div, "true_divide": math.div, "neg": math.neg, "negative": math.neg,
    "pow": math.pow, "reciprocal": math.reciprocal, "exp": math.exp, "log": math.log, "sqrt": math.sqrt,
    "abs": math.abs,
    "clamp": math.clamp, "clip": math.clamp, "clamp_min": math.clamp_min, "clamp_max": math.clamp_max,
    "maximum": math.maximum, "minimum": math.minimum, "sign": math.sign, "where": lambda self, cond, other:
    math.where(cond, self, other), "absolute": math.abs,
    "eq": math.eq, "ne": math.ne, "lt": math.lt, "le": math.le, "gt": math.gt, "ge": math.ge,
    "logical_not": math.logical_not, "logical_and": math.logical_and, "logical_or": math.logical_or,
    "logical_xor": math.logical_xor,
    "all": math.all, "any": math.any, "isnan": math.isnan, "isfinite": math.isfinite, "equal": math.equal,
    "allclose": math.allclose,
    "floor_divide": math.floor_divide, "remainder": math.remainder,
    # activations
    "relu": activation.relu, "sigmoid": activation.sigmoid, "tanh": activation.tanh,
    "softmax": activation.softmax, "log_softmax": activation.log_softmax, "logsumexp": activation.logsumexp,
    # reductions
    "sum": reduction.sum, "mean": reduction.mean, "var": reduction.var, "std": reduction.std,
    "max": reduction.max, "min": reduction.min, "amax": reduction.amax, "amin": reduction.amin,
    "argmax": reduction.argmax, "argmin": reduction.argmin, "count_nonzero": reduction.count_nonzero,
    "nansum": reduction.nansum, "nanmean": reduction.nanmean,
    # linear algebra
    "matmul": linalg.matmul, "mm": linalg.mm, "bmm": linalg.bmm, "dot": linalg.dot, "mv": linalg.mv,
    "trace": linalg.trace,
    # shapes
    "reshape": shape.reshape, "view": shape.view, "flatten": shape.flatten, "squeeze": shape.squeeze,
    "unsqueeze": shape.unsqueeze, "transpose": shape.transpose, "swapaxes": shape.transpose,
    "swapdims": shape.transpose, "t": shape.t, "permute": _dims_method(shape.permute), "expand": shape.expand,
    "expand_as": shape.expand_as, "unbind": shape.unbind, "split": shape.split, "chunk": shape.chunk,
    "T": property(_T), "mT": property(_mT),
    "clone": copy.clone,
    # sampling
    "multinomial": sampling.multinomial,
    # in place
    "add_": lambda self, other, *, alpha=1: arithmetic_inplace(self, "add", other, alpha),
    "sub_": lambda self, other, *, alpha=1: arithmetic_inplace(self, "sub", other, alpha),
    "mul_": lambda self, other: arithmetic_inplace(self, "mul", other),
    "div_": lambda self, other, *, rounding_mode=None: arithmetic_inplace(self, "div", other,
                                                                          rounding_mode=rounding_mode),
    "clamp_": _clamp_, "clip_": _clamp_, "fill_": _fill_, "zero_": _zero_, "copy_": _copy_,
    "contiguous": copy.contiguous,
    "neg_": _inplace(math.Neg, "Negate in place."),
    "exp_": _inplace(math.Exp, "Exponentiate in place.", math.exp),
    "log_": _inplace(math.Log, "Natural logarithm in place.", math.log),
    "sqrt_": _inplace(math.Sqrt, "Square root in place.", math.sqrt),
    "abs_": _inplace(math.Abs, "Absolute value in place."),
    "pow_": _pow_, "__ipow__": _pow_,
    "relu_": _inplace(activation.Relu, "ReLU in place.", activation.relu),
    "sigmoid_": _inplace(activation.Sigmoid, "Sigmoid in place.", activation.sigmoid),
    "tanh_": _inplace(activation.Tanh, "tanh in place.", activation.tanh),
}

# the wider families: each function is also a method, but einsum (a function of several operands)
for _module in (elementwise, trigonometric, more_math, gather_scatter, masking, rearrange, triangular, sorting,
                cumulative, norm, einsum):
    _METHODS.update({name: getattr(_module, name) for name in _module.__all__ if name != "einsum"})

_METHODS.update({name: _function_inplace(fn, f"``{name[:-1]}`` in place.") for name, fn in _FUNCTION_INPLACE.items()})
# the in-place inverse hyperbolic functions have a node of their own in PyTorch (with no derivative)
for _names, _cls, _fn in ((("asinh_", "arcsinh_"), more_math.AsinhInplace, more_math.asinh),
                          (("acosh_", "arccosh_"), more_math.AcoshInplace, more_math.acosh),
                          (("atanh_", "arctanh_"), more_math.AtanhInplace, more_math.atanh)):
    for _name in _names:
        _METHODS[_name] = _inplace(_cls, f"``{_name[:-1]}`` in place (PyTorch defines no derivative for it).", _fn)

for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

# Methods that need modules above tensor.py: the engine's entry, conversions and factories.
Tensor.backward = api.tensor_backward
Tensor.to = copy.to
Tensor.new_tensor = creation.new_tensor
Tensor.sum_to_size = shape.sum_to_size
