"""Recording one forward call: which ops ran, on which arrays, with which arguments, inside which module.

Every op is an ``Op`` subclass whose ``forward`` runs on arrays, so for the length of the call each class that
defines a ``forward`` gets a wrapper that notes ``(op class, input arrays, keyword arguments, output)``; an op that
another op's forward calls is part of that op and is not noted. A module whose layer has a converter of its own
(``Linear``, ``Conv2d``, ``LSTM``, ...) is noted as one call (its arguments and output) and the ops it runs inside are
not. The wrappers and the modules' ``forward`` attributes are removed when the call ends, even when it raised.
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..autograd.function import Op
from ..autograd.tensor import Tensor
from ..functional import multi_head_attention
from ..layers import attention as attention_layer

__all__ = ["TENSOR_METHODS", "Record", "TensorMethod", "Tracer", "fingerprint", "flat_arrays", "op_classes", "prints"]

# Tensor methods that are no Op (their results never require grad): comparisons and logic, recorded by name
TENSOR_METHODS = {
    **{f"__{n}__": n for n in ("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "invert")},
    **{n: n for n in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor")},
    **{"logical_not": "logical_not", "bitwise_not": "invert", "isnan": "isnan"},
    # casts to integer or bool types make their tensor without an op; the others run ToCopy, noted once here
    **{n: "to" for n in ("to", "bool", "long", "int", "short", "float", "double", "half", "type_as")},
    # max(dim) and min(dim) find their indices outside the op that gathers the values
    **{n: n for n in ("max", "min", "argmax", "argmin", "topk", "sort", "argsort")},
    "__setitem__": "setitem",
    # arithmetic in place outside a graph runs NumPy's ufunc into the tensor's array: no op to see
    **{f"__i{n}__": f"{n}_" for n in ("add", "sub", "mul")},
    **{"__itruediv__": "div_", "add_": "add_", "sub_": "sub_", "mul_": "mul_", "div_": "div_"},
}

# functions that make a tensor without an op, by the modules that call them: recorded as one call each
FUNCTIONS = ((multi_head_attention, "canonical_mask"), (attention_layer, "canonical_mask"))


class TensorMethod:
    """The target of a recorded Tensor method that is no Op (``x == y``): its name, keyed ``tensor.<name>``.

    >>> TensorMethod("eq").__name__
    'eq'
    """

    def __init__(self, name: str, kind: str = "tensor"):
        self.__name__ = name
        self.__module__ = kind

    def __repr__(self) -> str:
        return f"Tensor.{self.__name__}"


@dataclass
class Record:
    """One recorded call: an op (``module`` is None) or a module converted whole.

    ``inputs``: the op's positional arguments (arrays or numbers) or the module's (Tensors and other values);
    ``params``: keyword arguments; ``output``: what it returned; ``scope``: the qualified name of the innermost
    module running it ('' for the model itself); ``seen`` and ``made``: fingerprints of the input arrays when it
    began and of the outputs when it ended, by which a value changed in place in between is noticed.

    >>> Record(TensorMethod("eq"), (1, 2), {}, False, "").scope
    ''
    """

    target: Any
    inputs: tuple
    params: dict
    output: Any
    scope: str
    module: Any = None
    seen: tuple = ()  # fingerprints of the arrays of inputs and params when the call began
    made: tuple = ()  # fingerprints of the outputs when it ended


def flat_arrays(value: Any) -> list:
    """The arrays of the tensors (or arrays) in a nested tuple, list or dict, in order; other values are left out.

    >>> import trainkit
    >>> [a.shape for a in flat_arrays((trainkit.ones(2), [None, {"k": trainkit.zeros(1, 3)}]))]
    [(2,), (1, 3)]
    """
    if isinstance(value, Tensor):
        return [value.numpy(force=True)]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in flat_arrays(v)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in flat_arrays(v)]
    if isinstance(value, np.ndarray):
        return [value]
    return []


def fingerprint(array) -> int:
    """A number that changes when the array's contents (or shape or dtype) change: how a value changed in place
    between two ops is noticed.

    >>> a = np.zeros(3, "float32"); before = fingerprint(a); a[0] = 1
    >>> fingerprint(a) == before
    False
    """
    data = np.ascontiguousarray(array).reshape(-1)
    return hash((array.shape, array.dtype.str, zlib.crc32(data.view(np.uint8))))


def prints(value: Any) -> tuple:
    return tuple(fingerprint(a) for a in flat_arrays(value))


def op_classes() -> list[type]:
    """Every ``Op`` subclass defined so far, parents before children.

    >>> any(c.__name__ == "MulBackward0" for c in op_classes())
    True
    """
    out, stack = [], [Op]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            out.append(sub)
            stack.append(sub)
    return out


def _plain(value: Any) -> Any:
    """Tensors (also inside an index tuple) as their arrays."""
    if isinstance(value, Tensor):
        return value.numpy(force=True)
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


class Tracer:
    """A context manager that records the ops and module calls of a forward pass on this thread.

    >>> import trainkit
    >>> from trainkit import nn
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.Tanh())
    >>> with Tracer(net, whole=lambda m: isinstance(m, nn.Linear)) as tr:
    ...     _ = net(trainkit.ones(1, 2))
    >>> [type(r.module).__name__ if r.module is not None else r.target.__name__ for r in tr.records]
    ['Linear', 'TanhBackward0']
    """

    def __init__(self, model, whole=None):
        self.model = model
        self.whole = whole or (lambda module: False)  # module -> whether it is recorded as one call
        self.records: list[Record] = []
        self.scopes: list[str] = [""]
        self.depth = 0  # > 0 inside an op's forward or a module converted whole: nothing is noted there
        self.thread = threading.get_ident()
        self.patched: list[tuple[Any, str, Any]] = []
        self.modules: list = []

    # ------------------------------------------------------------------------------------------------ ops
    def _wrap_op(self, cls: type, original):
        tracer = self

        def forward(node, *arrays, **params):
            if tracer.depth or threading.get_ident() != tracer.thread:
                return original(node, *arrays, **params)
            seen = prints([arrays, params])
            tracer.depth += 1
            try:
                out = original(node, *arrays, **params)
            finally:
                tracer.depth -= 1
            # a NumPy scalar (x.sum()) becomes a 0-d array here rather than in apply, so the tensor holds this one
            if isinstance(out, np.generic):
                out = np.asarray(out)
            elif isinstance(out, tuple):
                out = tuple(np.asarray(o) if isinstance(o, np.generic) else o for o in out)
            tracer.records.append(Record(type(node), arrays, params, out, tracer.scopes[-1], None, seen, prints(out)))
            return out

        forward.__wrapped__ = original
        return forward

    def _wrap_method(self, name: str, original):
        tracer = self
        target = TensorMethod(name)

        def method(*args, **kwargs):
            if tracer.depth or threading.get_ident() != tracer.thread:
                return original(*args, **kwargs)
            inputs = tuple(_plain(a) for a in args)
            kwargs_plain = {k: _plain(v) for k, v in kwargs.items()}
            seen = prints([inputs, kwargs_plain])
            tracer.depth += 1  # the ops it runs are part of it
            try:
                out = original(*args, **kwargs)
            finally:
                tracer.depth -= 1
            if name == "setitem" or name.endswith("_"):  # the tensor itself is the result, changed in place
                out_arrays = inputs[0]
            elif isinstance(out, Tensor) and out is not args[0]:
                out_arrays = out.numpy(force=True)
            elif isinstance(out, tuple) and all(isinstance(t, Tensor) for t in out):
                out_arrays = [t.numpy(force=True) for t in out]
            else:
                return out
            record = Record(target, inputs, kwargs_plain, out_arrays, tracer.scopes[-1], None, seen, prints(out_arrays))
            tracer.records.append(record)
            return out

        return method

    def _wrap_function(self, name: str, original):
        tracer = self
        target = TensorMethod(name, "function")

        def function(*args, **kwargs):
            inputs = tuple(_plain(a) for a in args)
            seen = prints([inputs, kwargs])
            out = original(*args, **kwargs)
            if not tracer.depth and threading.get_ident() == tracer.thread and isinstance(out, Tensor):
                array = out.numpy(force=True)
                tracer.records.append(
                    Record(target, inputs, kwargs, array, tracer.scopes[-1], None, seen, prints(array))
                )
            return out

        return function

    # ------------------------------------------------------------------------------------------------ modules
    def _wrap_module(self, name: str, module):
        tracer = self
        original = module.forward
        whole = bool(self.whole(module))

        def forward(*args, **kwargs):
            if tracer.depth or threading.get_ident() != tracer.thread:
                return original(*args, **kwargs)
            tracer.scopes.append(name)
            seen = prints([args, kwargs]) if whole else ()
            if whole:
                tracer.depth += 1
            try:
                out = original(*args, **kwargs)
            finally:
                tracer.scopes.pop()
                if whole:
                    tracer.depth -= 1
            if whole:
                tracer.records.append(Record(type(module), args, kwargs, out, name, module, seen, prints(out)))
            return out

        return forward

    def __enter__(self) -> Tracer:
        try:
            for cls in op_classes():
                if "forward" in cls.__dict__:
                    original = cls.__dict__["forward"]
                    self.patched.append((cls, "forward", original))
                    cls.forward = self._wrap_op(cls, original)
            for attr, name in TENSOR_METHODS.items():
                if attr in Tensor.__dict__:
                    original = Tensor.__dict__[attr]
                    self.patched.append((Tensor, attr, original))
                    setattr(Tensor, attr, self._wrap_method(name, original))
            for owner, attr in FUNCTIONS:
                original = getattr(owner, attr, None)
                if original is not None:
                    self.patched.append((owner, attr, original))
                    setattr(owner, attr, self._wrap_function(attr, original))
            for name, module in self.model.named_modules():
                if "forward" not in module.__dict__:
                    module.__dict__["forward"] = self._wrap_module(name, module)
                    self.modules.append(module)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for cls, attr, original in reversed(self.patched):
            setattr(cls, attr, original)
        self.patched.clear()
        for module in self.modules:
            module.__dict__.pop("forward", None)
        self.modules.clear()
