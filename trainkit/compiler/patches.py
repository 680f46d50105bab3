"""The wrappers a capture puts on classes for its duration, and what each one notes.

Set on the classes while a region is captured (so that nothing else pays for them) and taken off after:

- ``Op.apply``'s recorder list gets the ``Recorder`` (see ``capture``);
- ``Tensor.backward`` notes a backward pass; the optimizers' group updates and ``zero_grad`` (an optimizer's or a
  module's) and ``Tensor.grad``'s setter note calls the plan repeats;
- the methods that read a tensor's values into Python (``item``, ``bool()``, ...) refuse the region (Python may
  branch on the value); the tensor methods without a gradient (``x > 0``, ``argmax``, ``detach``) are noted as
  ``FuncStep``s; ``Tensor._make`` notes tensors made outside the ops, and by which module;
- ``Module.__call__`` notes the modules the region runs (their flags and hooks are guarded).

Each wrapper acts only for the capturing thread, and not inside a call the plan repeats as a whole.
"""

from __future__ import annotations

import sys
import threading

from ..autograd import function
from ..autograd.tensor import Tensor
from ..layers.module import Module
from ..optim.optimizer import Optimizer
from .plan import CallStep, Refused
from .state import module_roots, note_places

# Modules whose tensors made during a capture are constants of the region: creation functions (zeros, arange,
# tensor(...)), whose values follow from their arguments; random ones are caught by the generator's state.
CONSTANT_MAKERS = {"trainkit.autograd.creation"}
# Tensor methods without a gradient that make their result outside Op.apply: recorded as FuncSteps.
FUNCTIONS = (
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "eq", "ne", "lt", "le", "gt", "ge",
    "__and__", "__or__", "__xor__", "__invert__", "logical_and", "logical_or", "logical_not", "logical_xor",
    "isnan", "isfinite", "isinf", "argmax", "argmin", "detach",
)  # fmt: skip
READS = ("item", "tolist", "numpy", "__bool__", "__float__", "__int__", "__index__", "__array__")


class Patches:
    """The wrappers a capture puts on classes for its duration (see the module's docstring)."""

    def __init__(self, rec):  # a capture.Recorder
        self.rec = rec
        self.saved: list = []

    def put(self, owner, name: str, value) -> None:
        self.saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def __enter__(self):
        rec = self.rec
        mine = rec.thread
        for name in FUNCTIONS:
            if name in Tensor.__dict__:
                self.put(Tensor, name, _function(rec, Tensor.__dict__[name], mine))
        for name in READS:
            if name in Tensor.__dict__:
                self.put(Tensor, name, _reading(rec, name, Tensor.__dict__[name], mine))
        self.put(Tensor, "backward", _backward(rec, Tensor.backward, mine))
        grad = Tensor.__dict__["grad"]
        self.put(Tensor, "grad", property(grad.fget, _grad_setter(rec, grad.fset, mine), grad.fdel, grad.__doc__))
        self.put(Module, "__call__", _module_call(rec, Module.__call__, mine))
        self.put(Tensor, "_make", staticmethod(_making(rec, Tensor._make, mine)))
        self.put(Module, "zero_grad", _opaque(rec, "zero_grad", Module.zero_grad, mine))
        self.put(Optimizer, "zero_grad", _opaque(rec, "zero_grad", Optimizer.zero_grad, mine))
        for cls in _subclasses(Optimizer):
            if "_update_group" in cls.__dict__:
                self.put(cls, "_update_group", _update(rec, cls.__dict__["_update_group"], mine))
        function.recording.append(rec)
        return self

    def __exit__(self, *exc):
        function.recording.remove(self.rec)
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)


def _subclasses(cls) -> list:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(_subclasses(sub))
    return out


def _active(rec, mine: int) -> bool:
    return rec.opaque == 0 and threading.get_ident() == mine


def _reading(rec, name, method, mine):
    def wrapper(self, *args, **kwargs):
        if _active(rec, mine) and (id(self) in rec.slot_of or id(self) in rec.fresh) and rec.refusal is None:
            shown = {"__bool__": "bool(tensor)", "__float__": "float(tensor)", "__int__": "int(tensor)"}
            rec.refuse(
                f"{shown.get(name, f'tensor.{name}()')} reads a value inside the region: Python code may branch on "
                "it (data-dependent control flow); read it outside the compiled function"
            )
        return method(self, *args, **kwargs)

    return wrapper


def _function(rec, method, mine):
    """A tensor method without a gradient (``x > 0``, ``argmax``), noted as a ``FuncStep``; what it does inside
    is not recorded."""

    def wrapper(*args, **kwargs):
        if not _active(rec, mine) or rec.refusal is not None:
            return method(*args, **kwargs)
        rec.opaque += 1
        function.recording.remove(rec)
        try:
            out = method(*args, **kwargs)
        finally:
            function.recording.append(rec)
            rec.opaque -= 1
        if isinstance(out, Tensor) and not out._requires_grad:
            try:
                rec.note_function(method, args, kwargs, out)
            except Refused as why:
                rec.refuse(str(why))
        elif out is not NotImplemented:
            rec.refuse(f"{getattr(method, '__name__', method)} returned something the compiler cannot replay")
        return out

    return wrapper


def _making(rec, make, mine):
    """``Tensor._make``, noting each tensor made outside an op's ``apply`` and the module that made it."""

    def wrapper(*args, **kwargs):
        t = make(*args, **kwargs)
        if _active(rec, mine):
            maker = sys._getframe(1).f_globals.get("__name__", "?")
            rec.fresh[id(t)] = (t, maker)
            if maker in CONSTANT_MAKERS:  # an op may take its array as a keyword argument (positions' indices)
                rec.owners[id(t._data)] = t
        return t

    return wrapper


def _backward(rec, method, mine):
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        noting = _active(rec, mine) and rec.refusal is None
        if noting:
            try:
                rec.backward(self, gradient, retain_graph, create_graph, inputs)
            except Refused as why:
                noting = False
                rec.refuse(str(why))
        method(self, gradient, retain_graph, create_graph, inputs)
        if noting:
            rec.after_backward()
            rec.resnapshot()  # the pass bumped nothing the region reads, but .grad tensors came into being

    return backward


def _grad_setter(rec, fset, mine):
    def setter(self, value):
        if _active(rec, mine) and rec.refusal is None:
            if value is not None:
                rec.refuse("a tensor assigned to .grad inside the region")
            else:
                rec.steps.append(CallStep("set_grad", rec.slot(self), (), "tensor.grad = None"))
        fset(self, value)

    return setter


def _module_call(rec, method, mine):
    def call(self, *args, **kwargs):
        if _active(rec, mine):
            rec.modules[id(self)] = self
            rec.known(self)
            note_places(rec.places, module_roots(self))  # its attributes before it runs: state it may carry
            counter = getattr(self, "num_batches_tracked", None)
            if self.training and getattr(self, "track_running_stats", False) and isinstance(counter, Tensor):
                if getattr(self, "momentum", 0.1) is None:
                    rec.refuse(f"{type(self).__name__}(momentum=None) reads its batch count in Python")
                rec.steps.append(CallStep("count", counter, (), f"{type(self).__name__}.num_batches_tracked += 1"))
            if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks:
                rec.refuse(f"{type(self).__name__} has forward or backward hooks")
        return method(self, *args, **kwargs)

    return call


def _opaque(rec, kind, method, mine):
    """A method the plan calls as it is (``zero_grad``); nothing inside it is recorded."""

    def wrapper(self, *args, **kwargs):
        if not _active(rec, mine) or rec.refusal is not None:
            return method(self, *args, **kwargs)
        if getattr(type(self), kind) is not wrapper:
            rec.refuse(f"{type(self).__name__} overrides {kind}()")
            return method(self, *args, **kwargs)
        try:
            rec.call(kind, self, (method, args, kwargs), f"{type(self).__name__}.{kind}()")
        except Refused as why:
            rec.refuse(str(why))
        rec.opaque += 1
        function.recording.remove(rec)
        try:
            return method(self, *args, **kwargs)
        finally:
            function.recording.append(rec)
            rec.opaque -= 1
            rec.resnapshot()

    return wrapper


def _update(rec, method, mine):
    """An optimizer's update of one parameter group, replayed by calling it again on the same group."""

    def wrapper(self, group, params):
        if not _active(rec, mine) or rec.refusal is not None:
            return method(self, group, params)
        try:
            index = next(i for i, g in enumerate(self.param_groups) if g is group)
            rec.call("update", self, (method, index), f"{type(self).__name__} update of group {index}")
        except (Refused, StopIteration) as why:
            rec.refuse(str(why) or "an optimizer update of a group it does not hold")
        rec.opaque += 1
        function.recording.remove(rec)
        try:
            return method(self, group, params)
        finally:
            function.recording.append(rec)
            rec.opaque -= 1
            rec.resnapshot()

    return wrapper
