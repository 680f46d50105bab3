"""The ``out=`` keyword of the top-level functions (``trainkit.add(a, b, out=c)``), as PyTorch has it.

The ops know nothing of ``out``. Each exported function that takes it in PyTorch is wrapped once, at import, by
``with_out``: without ``out`` the wrapper calls the op at once; with it, it does what PyTorch does:

- refuses when autograd would record (grad mode on and an input, or ``out`` itself, requires grad), since a result
  written into an existing tensor has no graph: "add(): functions with out=... arguments don't support automatic
  differentiation, but one of the arguments requires grad.";
- checks ``out``'s dtype the way the op does in PyTorch: most element-wise ops and reductions accept any dtype the
  result can be cast to (no float into an integer, nothing but bool into bool), others want the exact dtype, each
  with PyTorch's message; ``sum``, ``prod``, ``cumsum`` and ``cumprod`` compute in ``out``'s dtype, and the
  factories (``zeros``, ``arange``, ``rand``, ...) make their values in it;
- writes the result into ``out``'s storage, or, when the shapes differ, gives ``out`` new storage of the right shape
  (warning that this is deprecated when ``out`` was not empty), bumps ``out._version`` and returns ``out`` itself
  (for ``max(x, dim)``, ``sort`` and ``topk``, ``out`` is a pair and a ``(values, indices)`` tuple of it comes back).

Methods (``x.add(y)``, ``x + y``) take no ``out`` in PyTorch and are not wrapped: they run exactly as before. A
top-level call without ``out`` costs one extra Python call.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections import namedtuple

from . import grad_mode
from .backend import dtype as _dtype
from .backend import kind_of, to_dtype
from .tensor import Tensor

__all__ = ["with_out", "wrap_namespace"]

_SCALAR = {
    "float16": "Half",
    "float32": "Float",
    "float64": "Double",
    "int8": "Char",
    "uint8": "Byte",
    "int16": "Short",
    "int32": "Int",
    "int64": "Long",
    "bool": "Bool",
}
_CTYPE = {
    "float16": "c10::Half",
    "float32": "float",
    "float64": "double",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int16": "short int",
    "int32": "int",
    "int64": "long int",
    "bool": "bool",
}

AUTOGRAD_MESSAGE = (
    "{}(): functions with out=... arguments don't support automatic differentiation, but one of the arguments "
    "requires grad."
)
RESIZE_WARNING = (
    "An output with one or more elements was resized since it had shape {}, which does not match the required "
    "output shape {}. This behavior is deprecated, and in a future PyTorch release outputs will not be resized "
    "unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
    "elements with t.resize_(0)."
)
ARANGE_RESIZE_WARNING = (
    "The number of elements in the out tensor of shape {} is {} which does not match the computed number of "
    "elements {}. Note that this may occur as a result of rounding error. The out tensor will be resized to a tensor "
    "of shape {}."
)
OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory location. "
    "Please clone() the tensor before performing the operation."
)


def _can_cast(src, dst) -> bool:
    """PyTorch's canCast: no floating value into an integer or bool tensor, no non-bool value into a bool one."""
    if kind_of(src) == "f" and kind_of(dst) != "f":
        return False
    return not (src.kind != "b" and dst.kind == "b")


# Each check takes (name, result dtype, out dtype), NumPy dtypes, and returns the error to raise, or None.
def _cast(name, r, o):
    if not _can_cast(r, o):
        return RuntimeError(f"result type {_SCALAR[r.name]} can't be cast to the desired output type {_SCALAR[o.name]}")
    return None


def _same(name, r, o):
    if r != o:
        return RuntimeError(f"Expected out tensor to have dtype {_CTYPE[r.name]}, but got {_CTYPE[o.name]} instead")
    return None


def _found(name, r, o):
    if r != o:
        return RuntimeError(f"Found dtype {_SCALAR[o.name]} but expected {_SCALAR[r.name]}")
    return None


def _where(name, r, o):
    if r != o:
        return RuntimeError(f"Expected out type to be {_SCALAR[r.name]} but got {_SCALAR[o.name]}")
    return None


def _dot(name, r, o):
    if r != o:
        return RuntimeError(f"result dtype {_SCALAR[o.name]} does not match input dtype {_SCALAR[r.name]}")
    return None


def _mv(name, r, o):
    if r != o:  # PyTorch's mv is addmv with out as the added vector
        return RuntimeError(
            f"addmv input tensors must have the same dtype, but got {_SCALAR[o.name]}, "
            f"{_SCALAR[r.name]}, and {_SCALAR[r.name]}"
        )
    return None


def _amax(name, r, o):
    if r != o:
        return RuntimeError(
            f"Expected the dtype for input and out to match, but got {_SCALAR[r.name]} for input's dtype and "
            f"{_SCALAR[o.name]} for out's dtype."
        )
    return None


def _same_scalar(name, r, o):
    if r != o:
        return RuntimeError(f"{name}(): self and result must have the same scalar type")
    return None


def _nonzero(name, r, o):
    if r != o:
        return RuntimeError(
            f"nonzero: Expected out tensor to have scalar type Long but got scalar type{_SCALAR[o.name]}"
        )
    return None


def _bool(name, r, o):
    if o.kind != "b":
        return RuntimeError(f"{name} only supports bool tensor for result, got: {_SCALAR[o.name]}")
    return None


def _cat(name, r, o):
    if not _can_cast(r, o):
        return TypeError(f"torch.cat(): input types can't be cast to the desired output type {_SCALAR[o.name]}")
    return None


def _logsumexp(name, r, o):
    if kind_of(o) != "f":
        return RuntimeError(f"logsumexp(): Expected floating point type for result tensor, but got: {_SCALAR[o.name]}")
    return None


def _mean_all(name, r, o):
    if not _can_cast(r, o):
        return RuntimeError(f"mean.dtype_out(): input types can't be cast to the desired output type {_SCALAR[o.name]}")
    return None


def _extreme_all(name, r, o):
    if not _can_cast(r, o):
        return RuntimeError(
            "Expected canCast( typeMetaToScalarType(self.dtype()), typeMetaToScalarType(out.dtype())) to be true, "
            "but got false.  (Could this error message be improved?  If so, please report an enhancement request "
            "to PyTorch.)"
        )
    return None


def _none(name, r, o):
    return None


class _Spec:
    """How one function takes ``out``: the name its autograd error gives, its dtype check, whether it is
    differentiable (non-differentiable ops accept inputs that require grad), and its kind: 'op', 'dtype' (computes
    in out's dtype) or 'factory'."""

    __slots__ = ("name", "check", "differentiable", "kind", "pair", "warn_resize")

    def __init__(self, name, check=_cast, differentiable=True, kind="op", pair=False, warn_resize: str | None = "op"):
        self.name, self.check, self.differentiable = name, check, differentiable
        self.kind, self.pair, self.warn_resize = kind, pair, warn_resize


def _op(name=None, check=_cast, differentiable=True, pair=False):
    return lambda key: _Spec(name or key, check, differentiable, "op", pair)


def _in_out_dtype(key):
    return _Spec(key, _none, True, "dtype")


def _factory(key):
    return _Spec(key, _none, False, "factory", warn_resize="arange" if key == "arange" else None)


_NAMES = {
    **{
        n: _op()
        for n in (
            "add",
            "sub",
            "mul",
            "div",
            "remainder",
            "fmod",
            "pow",
            "atan2",
            "maximum",
            "minimum",
            "exp",
            "log",
            "sqrt",
            "reciprocal",
            "sigmoid",
            "tanh",
            "sin",
            "cos",
            "tan",
            "asin",
            "acos",
            "atan",
            "sinh",
            "cosh",
            "exp2",
            "expm1",
            "log2",
            "log10",
            "log1p",
            "rsqrt",
            "erf",
            "lerp",
            "addcmul",
            "addcdiv",
            "std",
            "var",
            "erfc",
            "asinh",
            "acosh",
            "atanh",
            "deg2rad",
            "rad2deg",
            "logit",
            "xlogy",
            "nan_to_num",
        )
    },
    "arcsin": _op("asin"),
    "arccos": _op("acos"),
    "arctan": _op("atan"),
    "arcsinh": _op("asinh"),
    "arccosh": _op("acosh"),
    "arctanh": _op("atanh"),
    "fix": _op("trunc", _found),
    "sgn": _op(check=_found),
    "subtract": _op("sub"),
    "multiply": _op("mul"),
    "divide": _op("div"),
    "true_divide": _op("div"),
    "square": _op("pow"),
    "outer": _op("mul"),
    **{
        n: _op(check=_found)
        for n in ("abs", "neg", "sign", "floor", "ceil", "round", "trunc", "frac", "clamp", "clamp_min", "clamp_max")
    },
    "absolute": _op("abs", _found),
    "negative": _op("neg", _found),
    "clip": _op("clamp", _found),
    **{
        n: _op(check=_cast, differentiable=False)
        for n in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "floor_divide")
    },
    "all": _op(check=_bool, differentiable=False),
    "any": _op(check=_bool, differentiable=False),
    **{
        n: _op(check=_same)
        for n in (
            "matmul",
            "mm",
            "bmm",
            "softmax",
            "log_softmax",
            "gather",
            "scatter",
            "scatter_add",
            "scatter_reduce",
            "diag",
            "tril",
            "triu",
        )
    },
    "take_along_dim": _op("gather", _same),
    "norm": _op("linalg_vector_norm", _same),
    "dot": _op(check=_dot),
    "where": _op(check=_where),
    "amax": _op(check=_amax),
    "amin": _op(check=_amax),
    "argmax": _op(check=_same, differentiable=False),
    "argmin": _op(check=_same, differentiable=False),
    "argsort": _op("sort", _same),
    "nonzero": _op(check=_nonzero, differentiable=False),
    "index_select": _op(check=_same_scalar),
    "masked_select": _op(check=_same_scalar),
    "logsumexp": _op(check=_logsumexp),
    "hstack": _op("cat", _cat),
    "vstack": _op("cat", _cat),
    "mv": _op(check=_mv),
    "cat": _op(check=_cat),
    "concat": _op("cat", _cat),
    "concatenate": _op("cat", _cat),
    "stack": _op(check=_cat),
    "sort": _op(check=_same, pair=True),
    "topk": _op(check=_same, pair=True),
    "max": _op(),
    "min": _op(),
    "mean": _op(),
    **{n: _in_out_dtype for n in ("sum", "prod", "cumsum", "cumprod")},
    **{
        n: _factory
        for n in ("zeros", "ones", "empty", "full", "arange", "linspace", "eye", "rand", "randn", "randint", "randperm")
    },
}


def _resolve(spec: _Spec, args: tuple, kwargs: dict) -> _Spec:
    """``max``, ``min`` and ``mean`` are several ops in PyTorch, told apart by their arguments."""
    key = spec.name
    if key in ("max", "min"):
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        if isinstance(dim, Tensor) or kwargs.get("other") is not None:
            return _Spec("maximum" if key == "max" else "minimum")
        if dim is None:
            return _Spec(key, _extreme_all)
        return _Spec(key, _same, pair=True)
    if key == "mean":
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        return _Spec(key, _mean_all if dim is None else _cast)
    return spec


def _requires_grad(values) -> bool:
    for v in values:
        if isinstance(v, Tensor):
            if v._requires_grad:
                return True
        elif isinstance(v, (list, tuple)) and _requires_grad(v):
            return True
    return False


def _out_tensors(public: str, out, pair: bool) -> tuple:
    if not pair:
        if not isinstance(out, Tensor):
            raise TypeError(f"{public}(): argument 'out' must be Tensor, not {type(out).__name__}")
        return (out,)
    if not isinstance(out, (tuple, list)):
        raise TypeError(f"{public}(): argument 'out' must be tuple of Tensors, not {type(out).__name__}")
    if len(out) != 2:
        raise TypeError(f"expected tuple of 2 elements but got {len(out)}")
    for i, o in enumerate(out):
        if not isinstance(o, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 'out', but got {type(o).__name__}")
    return tuple(out)


def _np_dtype(spec):
    return spec.np if isinstance(spec, _dtype) else to_dtype(spec).np


def _self_overlapping(array) -> bool:
    """True when several elements share one memory location (an expanded tensor): it cannot be written into."""
    return any(stride == 0 and n > 1 for stride, n in zip(array.strides, array.shape))


def _write(out: Tensor, result: Tensor, warn: str | None) -> None:
    data, src = out._data, result._data
    if data.shape == src.shape:
        data[...] = src
    else:
        if data.size and warn == "op":
            warnings.warn(RESIZE_WARNING.format(list(data.shape), list(src.shape)), UserWarning, stacklevel=4)
        elif data.size and warn == "arange" and data.size != src.size:
            message = ARANGE_RESIZE_WARNING.format(list(data.shape), data.size, src.size, tuple(src.shape))
            warnings.warn(message, UserWarning, stacklevel=4)
        out._data = src.astype(data.dtype)  # a copy: out must not share storage with the result or an input
    out._version_counter[0] += 1


_PAIR_TYPES: dict = {}


def _pair_type(name: str, fields: tuple):
    """PyTorch's ``torch.return_types.max_out`` and friends: a named (values, indices) of the out tensors."""
    key = (name, fields)
    if key not in _PAIR_TYPES:
        _PAIR_TYPES[key] = namedtuple(f"{name}_out", fields)
    return _PAIR_TYPES[key]


def _call(fn, spec: _Spec, public: str, args: tuple, kwargs: dict, out):
    spec = _resolve(spec, args, kwargs)
    outs = _out_tensors(public, out, spec.pair)
    recording = grad_mode.state.enabled
    if spec.kind == "factory":
        o = outs[0]
        if recording and o._requires_grad:
            raise RuntimeError(AUTOGRAD_MESSAGE.format("aten::" + spec.name))
        given = kwargs.get("dtype")
        if given is not None and _np_dtype(given) != o._data.dtype:
            raise RuntimeError(
                f"dtype {_SCALAR[_np_dtype(given).name]} does not match dtype of out parameter "
                f"({_SCALAR[o._data.dtype.name]})"
            )
        kwargs = dict(kwargs, dtype=o.dtype, device=kwargs.get("device") or o.device)
    elif (
        recording
        and spec.differentiable
        and (_requires_grad(args) or _requires_grad(kwargs.values()) or _requires_grad(outs))
    ):
        raise RuntimeError(AUTOGRAD_MESSAGE.format(spec.name))
    if spec.kind == "dtype":
        given = kwargs.get("dtype")
        if spec.name in ("cumsum", "cumprod") and outs[0]._data.dtype.kind == "b":
            raise NotImplementedError(f"\"{spec.name}_out_cpu\" not implemented for 'Bool'")
        if given is None:
            kwargs = dict(kwargs, dtype=outs[0].dtype)
        elif _np_dtype(given) != outs[0]._data.dtype:
            raise _same(spec.name, _np_dtype(given), outs[0]._data.dtype)
    result = fn(*args, **kwargs)
    results = tuple(result) if spec.pair else (result,)
    for i, (o, r) in enumerate(zip(outs, results)):
        check = spec.check if i == 0 else _same  # a pair's second tensor holds int64 indices: exactly that
        err = check(spec.name, r._data.dtype, o._data.dtype)
        if err is not None:
            raise err
        if type(o._data) is not type(r._data):
            raise RuntimeError(f"Expected out tensor to have device {r.device}, but got {o.device} instead")
        if _self_overlapping(o._data):
            raise RuntimeError(OVERLAP_MESSAGE)
    for o, r in zip(outs, results):
        _write(o, r, spec.warn_resize)
    if spec.kind == "factory" and result._requires_grad:
        outs[0].requires_grad_(True)
    if spec.pair:
        fields = getattr(result, "_fields", ("values", "indices"))
        return _pair_type(public, fields)(*outs)
    return outs[0]


def _signature(fn):
    """``fn``'s signature with the keyword-only ``out=None`` added (before any ``**kwargs``)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if "out" in sig.parameters:
        return sig
    at = len(params) - 1 if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD else len(params)
    params.insert(at, inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
    return sig.replace(parameters=params)


def with_out(fn, name: str):
    """``fn`` (the op exported as ``name``) taking PyTorch's ``out=`` keyword as well.

    >>> import trainkit
    >>> add = with_out(trainkit.autograd.ops.math.add, "add")
    >>> c = trainkit.zeros(2)
    >>> add(trainkit.ones(2), 1, out=c) is c, c
    (True, tensor([2., 2.]))
    """
    spec = _NAMES[name](name)

    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        return _call(fn, spec, name, args, kwargs, out)

    sig = _signature(fn)
    if sig is not None:
        wrapper.__signature__ = sig
    wrapper._takes_out = True
    return wrapper


def wrap_namespace(namespace: dict) -> None:
    """Replace, in ``namespace`` (``trainkit``'s globals), each function PyTorch gives ``out=`` by its wrapper.

    >>> ns = {"exp": __import__("trainkit").autograd.ops.math.exp}
    >>> wrap_namespace(ns); "out" in inspect.signature(ns["exp"]).parameters
    True
    """
    for name in _NAMES:
        fn = namespace.get(name)
        if fn is not None and not getattr(fn, "_takes_out", False):
            namespace[name] = with_out(fn, name)
