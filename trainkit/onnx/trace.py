"""Recording one forward call: which ops ran, on which arrays, with which arguments, inside which module.

Every op is an ``Op`` subclass whose ``forward`` runs on arrays, so for the length of the call each class that
defines a ``forward`` gets a wrapper that notes ``(op class, input arrays, keyword arguments, output)``; an op that
another op's forward calls is part of that op and is not noted. A module whose layer has a converter of its own
(``Linear``, ``Conv2d``, ``LSTM``, ...) is noted as one call (its arguments and output) and the ops it runs inside are
not. The wrappers and the modules' ``forward`` attributes are removed when the call ends, even when it raised.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..autograd.function import Op
from ..autograd.tensor import Tensor
from ..functional import multi_head_attention
from ..layers import attention as attention_layer

__all__ = ["TENSOR_METHODS", "Record", "TensorMethod", "Tracer", "op_classes"]

# Tensor methods that are no Op (their results never require grad): comparisons and logic, recorded by name
TENSOR_METHODS = {
    **{f"__{n}__": n for n in ("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "invert")},
    **{n: n for n in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor")},
    **{"logical_not": "logical_not", "bitwise_not": "invert", "isnan": "isnan"},
    # casts to integer or bool types make their tensor without an op; the others run ToCopy, noted once here
    **{n: "to" for n in ("to", "bool", "long", "int", "short", "float", "double", "half", "type_as")},
    # max(dim) and min(dim) find their indices outside the op that gathers the values
    **{n: n for n in ("max", "min", "argmax", "argmin", "topk", "sort", "argsort")},
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
    module running it ('' for the model itself).

    >>> Record(TensorMethod("eq"), (1, 2), {}, False, "").scope
    ''
    """

    target: Any
    inputs: tuple
    params: dict
    output: Any
    scope: str
    module: Any = None


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
            tracer.records.append(Record(type(node), arrays, params, out, tracer.scopes[-1]))
            return out

        forward.__wrapped__ = original
        return forward

    def _wrap_method(self, name: str, original):
        tracer = self
        target = TensorMethod(name)

        def method(*args, **kwargs):
            if tracer.depth or threading.get_ident() != tracer.thread:
                return original(*args, **kwargs)
            tracer.depth += 1  # the ops it runs are part of it
            try:
                out = original(*args, **kwargs)
            finally:
                tracer.depth -= 1
            outs = out if isinstance(out, tuple) else (out,)
            if all(isinstance(t, Tensor) for t in outs) and out is not args[0]:
                inputs = tuple(a.numpy(force=True) if isinstance(a, Tensor) else a for a in args)
                arrays = [t.numpy(force=True) for t in outs]
                record = Record(
                    target, inputs, kwargs, arrays if isinstance(out, tuple) else arrays[0], tracer.scopes[-1]
                )
                tracer.records.append(record)
            return out

        return method

    def _wrap_function(self, name: str, original):
        tracer = self
        target = TensorMethod(name, "function")

        def function(*args, **kwargs):
            out = original(*args, **kwargs)
            if not tracer.depth and threading.get_ident() == tracer.thread and isinstance(out, Tensor):
                inputs = tuple(a.numpy(force=True) if isinstance(a, Tensor) else a for a in args)
                tracer.records.append(Record(target, inputs, kwargs, out.numpy(force=True), tracer.scopes[-1]))
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
            if whole:
                tracer.depth += 1
            try:
                out = original(*args, **kwargs)
            finally:
                tracer.scopes.pop()
                if whole:
                    tracer.depth -= 1
            if whole:
                tracer.records.append(Record(type(module), args, kwargs, out, name, module))
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
