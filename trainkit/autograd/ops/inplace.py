"""In-place ops: ``add_``, ``mul_``, ``x[i] = v`` and friends.

Outside a graph they write straight into the tensor's storage. Inside one, the op runs out of place on a stand-in
for the tensor's old value (a copy only when the op's backward reads that value), the result is written into the
storage, and the tensor takes the new node as its ``grad_fn``. Either way its version goes up by one, which is how
saved tensors notice the change.
"""

from __future__ import annotations

import numpy as np

from .. import grad_mode
from ..backend import xp_of
from ..function import device_error
from ..tensor import Tensor
from . import math
from .shape import IndexPut, SetItem, WriteView, normalize_index
from .type_names import scalar_name

LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."


def _in_graph(self: Tensor, others) -> bool:
    if not grad_mode.state.enabled:
        return False
    if self._requires_grad:
        if self._grad_fn is None:
            raise RuntimeError(LEAF_MESSAGE)
        return True
    return any(isinstance(o, Tensor) and o._requires_grad for o in others)


def _write(self: Tensor, out) -> None:
    """Copy ``out`` into self's storage, with PyTorch's rules on shape and dtype, and bump the version."""
    data = self._data
    if out.shape != data.shape:
        raise RuntimeError(
            f"output with shape {list(data.shape)} doesn't match the broadcast shape {list(out.shape)}"
        )
    if out.dtype != data.dtype and not xp_of(data).can_cast(out.dtype, data.dtype, "same_kind"):
        raise RuntimeError(f"result type {scalar_name(out.dtype)} can't be cast to the desired output type "
                           f"{scalar_name(data.dtype)}")
    data[...] = out
    self._version_counter[0] += 1


def _rebind(self: Tensor, result: Tensor) -> None:
    """Make self the output of ``result``'s node; a retained grad follows the tensor to its new node."""
    old = self._grad_fn
    if old is not None and old._hooks is not None:
        ref = old._hooks.retain.get(self._output_nr)
        if ref is not None and ref() is self:
            del old._hooks.retain[self._output_nr]
            result._grad_fn._hooks_or_new().retain[0] = ref
    self._grad_fn, self._output_nr, self._requires_grad = result._grad_fn, 0, True


def apply_inplace(self: Tensor, cls, *others, **params) -> Tensor:
    """Run op ``cls`` on (self, *others) and store the result in self."""
    if not _in_graph(self, others):
        node = cls()
        out = node.forward(self._data, *[o._data if isinstance(o, Tensor) else o for o in others], **params)
        _write(self, xp_of(self._data).asarray(out))
        return self
    return _record(self, lambda source: cls.apply(source, *others, **params), 0 in cls.save_inputs)


def function_inplace(self: Tensor, fn, *args, **kwargs) -> Tensor:
    """``fn(self, *args, **kwargs)`` written into self: the in-place form of an op that is a function (it promotes
    its operands or picks its node by their types), recorded as that function's node."""
    if not _in_graph(self, args):
        out = fn(Tensor._make(self._data), *args, **kwargs)
        _write(self, xp_of(self._data).asarray(out._data))
        return self
    return _record(self, lambda source: fn(source, *args, **kwargs), True)


def _record(self: Tensor, run, keep_old: bool) -> Tensor:
    """Record an in-place op in the graph: ``run`` computes the new value from a stand-in for self's old value (a
    copy when ``keep_old``, since the op's backward reads it); the value is written into self, which takes the node."""
    if self._view is not None:
        return _inplace_on_view(self, run, keep_old)
    old_data = self._data.copy() if keep_old else self._data
    source = Tensor._make(old_data, self._requires_grad, self._grad_fn, self._output_nr)
    result = run(source)
    _write(self, result._data)
    if result._grad_fn is not None:
        _rebind(self, result)
    return self


def _inplace_on_view(view: Tensor, run, keep_old: bool) -> Tensor:
    """An in-place op through a view, recorded as PyTorch does: the base takes a ``CopySlices`` node that writes the
    view's new value into it, and the view becomes a fresh view of the updated base."""
    base, view_cls, view_params = view._view
    if view_cls is None:
        raise RuntimeError(
            f"Output {view._output_nr} of {view._grad_fn.name() if view._grad_fn else 'a multi-output op'} is a view "
            "and is being modified inplace. This view is the output of a function that returns multiple views. "
            "Such functions do not allow the output views to be modified inplace. You should replace the inplace "
            "operation by an out-of-place one."
        )
    root = base
    while root._view is not None:
        root = root._view[0]
    if root._requires_grad and root._grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    old_data = view._data.copy() if keep_old else view._data
    source = Tensor._make(old_data, view._requires_grad, view._grad_fn, view._output_nr)
    new_value = run(source)
    apply_inplace(base, WriteView, new_value, view_cls=view_cls, view_params=view_params)
    _rebind(view, view_cls.apply(base, **view_params))
    return view


_UFUNCS = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide"}


def arithmetic_inplace(self: Tensor, name: str, other, alpha=1, rounding_mode=None) -> Tensor:
    """``add_``, ``sub_``, ``mul_``, ``div_``: a ufunc writing into the storage when no graph is recorded."""
    if rounding_mode is not None:
        return function_inplace(self, math.div, other, rounding_mode=rounding_mode)
    if alpha != 1:
        other = math.mul(other, alpha)
    if isinstance(other, Tensor) and type(other._data) is not type(self._data):
        raise device_error((self, other))
    if _in_graph(self, (other,)):
        cls = {"add": math.Add, "sub": math.Sub, "mul": math.Mul, "div": math.Div}[name]
        return apply_inplace(self, cls, other)
    data = self._data
    xp = xp_of(data)
    value = other._data if isinstance(other, Tensor) else other
    try:
        getattr(xp, _UFUNCS[name])(data, value, out=data)
    except TypeError:
        raise RuntimeError(
            f"result type of {name}_ can't be cast to the desired output type {data.dtype}"
        ) from None
    except ValueError:
        if not getattr(data.flags, "writeable", True):
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor refers to a single memory "
                "location. Please clone() the tensor before performing the operation."
            ) from None
        other_shape = tuple(getattr(value, "shape", ()))
        try:
            message = f"the broadcast shape {list(np.broadcast_shapes(data.shape, other_shape))}"
        except ValueError:
            message = f"the other operand's shape {list(other_shape)}: they do not broadcast"
        raise RuntimeError(f"output with shape {list(data.shape)} doesn't match {message}") from None
    self._version_counter[0] += 1
    return self


def setitem(self: Tensor, key, value) -> None:
    """``self[key] = value``: an in-place op, recorded as ``CopySlices`` when a graph is involved."""
    index, kind = normalize_index(key, self._data)
    if not isinstance(value, (Tensor, bool, int, float)):
        value = Tensor._make(xp_of(self._data).asarray(value, dtype=self._data.dtype))
    if isinstance(value, Tensor) and type(value._data) is not type(self._data):
        raise device_error((self, value))
    if _in_graph(self, (value,)):
        parts = index if isinstance(index, tuple) else (index,)
        if all(p is Ellipsis or (isinstance(p, slice) and p == slice(None)) for p in parts):
            # the whole tensor: PyTorch records a copy_
            self.copy_(value if isinstance(value, Tensor) else Tensor._make(xp_of(self._data).asarray(value)))
            return
        apply_inplace(self, IndexPut if kind in ("mask", "index") else SetItem, value, index=index)
        return
    self._data[index] = value._data if isinstance(value, Tensor) else value
    self._version_counter[0] += 1
