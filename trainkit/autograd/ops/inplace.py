"""In-place ops: ``add_``, ``mul_``, ``x[i] = v`` and friends.

Outside a graph they write straight into the tensor's storage. Inside one, the op runs out of place on a stand-in
for the tensor's old value (a copy only when the op's backward reads that value), the result is written into the
storage, and the tensor takes the new node as its ``grad_fn``. Either way its version goes up by one, which is how
saved tensors notice the change.
"""

from __future__ import annotations

import numpy as np

from .. import grad_mode
from ..backend import kind_of, xp_of
from ..function import device_error
from ..saved import SAME_AS_OUTPUT
from ..scalar_fit import stored_value
from ..tensor import Tensor, refresh_view
from . import copy, math
from .shape import IndexPut, SetItem, normalize_index
from .type_names import legacy_type_name, scalar_name
from .view_replay import copy_slices, view_chain

__all__ = ["apply_inplace", "arithmetic_inplace", "check_overlap", "function_inplace", "setitem"]

LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_OF_LEAF_MESSAGE = "a view of a leaf Variable that requires grad is being used in an in-place operation."
NO_GRAD_HINT = (
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
    "both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
    "tracked) or both outside (if you want the inplace to be tracked)."
)
OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory location. "
    "Please clone() the tensor before performing the operation."
)


def _overlaps(data) -> bool:
    strides = getattr(data, "strides", ())
    # an empty array has no elements to share memory, whatever strides NumPy gave its axes
    return 0 in strides and data.size > 0 and any(s == 0 and n > 1 for n, s in zip(data.shape, strides))


def check_overlap(data) -> None:
    """PyTorch's refusal to write an element-wise result into a tensor whose elements share memory (an expanded
    one): the outcome would depend on the order the elements are written in."""
    if _overlaps(data):
        raise RuntimeError(OVERLAP_MESSAGE)


def _writable(data):
    """``data``, or a writable alias of it: NumPy marks a broadcast view read-only, where PyTorch writes through an
    expanded tensor into the memory it shares (which ``check_overlap`` has allowed)."""
    if getattr(data.flags, "writeable", True):
        return data
    alias = data.view()
    alias.flags.writeable = True
    return alias


def _root(view: Tensor) -> Tensor:
    """The tensor that owns the storage a view (of a view...) looks into."""
    while view._view is not None:
        view = view._view[0]
    return view


def _in_graph(self: Tensor, others, integral: bool = False, view_name: str | None = None) -> bool:
    """Whether the op is recorded, after PyTorch's checks of what may be changed in place in a graph (a view made
    in no_grad mode, an output of a multi-view op, a view of a leaf, a leaf). An integer or bool tensor written
    from a tensor that requires grad stays out of the graph, except (``integral``) where PyTorch records it all the
    same: fill_ with a 0-d tensor. ``view_name``: PyTorch writes through a view of ``self`` made by this op
    (``x[0] = v`` is ``x.select(0, 0).copy_(v)``)."""
    if not grad_mode.state.enabled:
        return False
    is_view = self._view is not None
    own = self._requires_grad or (is_view and _root(self)._requires_grad)
    requires = own
    if not requires and (integral or kind_of(self._data.dtype) in "fc"):
        requires = any(isinstance(o, Tensor) and o._requires_grad for o in others)
    if not requires:
        return False
    if is_view or view_name is not None:
        _check_view(self, view_name)
    # a view made while its base did not require grad has no node until it is used again after the base came
    # into the graph; PyTorch takes it for a leaf until then
    if own and self._grad_fn is None:
        raise RuntimeError(LEAF_MESSAGE)
    return True


def _check_view(self: Tensor, view_name: str | None) -> None:
    """PyTorch's refusals of an in-place change recorded through a view."""
    if self._no_grad_view:
        if view_name is None and self._no_grad_view == 1:
            prefix = "A view was created in"
        else:
            name = view_name or self._view[1].__name__
            nr = 0 if view_name else self._output_nr
            prefix = f"Output {nr} of {_op_name(name)} is a view of a view which was created in"
        raise RuntimeError(
            f"{prefix} no_grad mode and is being modified inplace with grad mode enabled. {NO_GRAD_HINT}"
        )
    if self._view is not None and self._view[1] is None:
        raise RuntimeError(
            f"Output {self._output_nr} of {_op_name(self._grad_fn.name()) if self._grad_fn else 'a multi-output op'} "
            "is a view and is being modified inplace. This view is the output of a function that returns multiple "
            "views. Such functions do not allow the output views to be modified inplace. You should replace the "
            "inplace operation by an out-of-place one."
        )
    root = _root(self)
    if root._requires_grad and root._grad_fn is None and (self._view is not None or view_name is not None):
        raise RuntimeError(VIEW_OF_LEAF_MESSAGE)


def _op_name(node_name: str) -> str:
    """The op a node belongs to, as PyTorch's view errors name it: ``SelectBackward0`` -> ``Select``."""
    return node_name.rstrip("0123456789").removesuffix("Backward")


def _write(self: Tensor, out) -> None:
    """Copy ``out`` into self's storage, with PyTorch's rules on shape and dtype, and bump the version."""
    data = self._data
    if out.shape != data.shape:
        raise RuntimeError(f"output with shape {list(data.shape)} doesn't match the broadcast shape {list(out.shape)}")
    if out.dtype != data.dtype and not xp_of(data).can_cast(out.dtype, data.dtype, "same_kind"):
        raise RuntimeError(
            f"result type {scalar_name(out.dtype)} can't be cast to the desired output type {scalar_name(data.dtype)}"
        )
    _writable(data)[...] = out
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
    in_graph = _in_graph(self, others, cls is copy.FillTensor)  # PyTorch checks the graph before the memory
    if not getattr(cls, "allows_overlap", False):
        check_overlap(self._data)
    if not in_graph:
        node = cls()
        out = node.forward(self._data, *[o._data if isinstance(o, Tensor) else o for o in others], **params)
        _write(self, xp_of(self._data).asarray(out))
        return self
    return _record(self, lambda source: cls.apply(source, *others, **params), 0 in cls.save_inputs)


def function_inplace(self: Tensor, fn, *args, **kwargs) -> Tensor:
    """``fn(self, *args, **kwargs)`` written into self: the in-place form of an op that is a function (it promotes
    its operands or picks its node by their types), recorded as that function's node."""
    if _overlaps(self._data):
        # PyTorch refuses the arguments themselves (TypeError) before it looks at the memory written into
        with np.errstate(all="ignore"):
            try:
                fn(Tensor._make(self._data), *args, **kwargs)
            except TypeError:
                raise
            except Exception:  # the overlap is the error PyTorch reports
                pass
        raise RuntimeError(OVERLAP_MESSAGE)
    try:
        if not _in_graph(self, args):
            out = fn(Tensor._make(self._data), *args, **kwargs)
            _write(self, xp_of(self._data).asarray(out._data))
            return self
        return _record(self, lambda source: fn(source, *args, **kwargs), True)
    except (NotImplementedError, RuntimeError):
        _check_output(self, args)  # the function checked its operands first; PyTorch checks the output before them
        raise


def _check_output(self: Tensor, operands) -> None:
    """PyTorch checks that the result fits the tensor written into (its shape, then its dtype) before the kernel
    looks at the dtypes it supports: raise what it raises when the function refused the operands first."""
    shapes = [o._data.shape for o in operands if isinstance(o, Tensor)]
    try:
        shape = np.broadcast_shapes(self._data.shape, *shapes)
    except ValueError:
        return
    if shape != self._data.shape:
        raise RuntimeError(
            f"output with shape {list(self._data.shape)} doesn't match the broadcast shape {list(shape)}"
        ) from None
    if not operands:
        return
    other = operands[0]  # later operands (lerp's weight, addcdiv's value) take no part in the result type
    rank = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}
    if isinstance(other, Tensor):
        kind, name = kind_of(other._data.dtype), scalar_name(other)
    elif type(other) in (int, float):
        kind, name = ("i", "Long") if type(other) is int else ("f", "Float")
    else:
        return
    if rank[kind] > rank[kind_of(self._data.dtype)]:
        raise RuntimeError(f"result type {name} can't be cast to the desired output type {scalar_name(self)}")


def _record(self: Tensor, run, keep_old: bool) -> Tensor:
    """Record an in-place op in the graph: ``run`` computes the new value from a stand-in for self's old value (a
    copy when ``keep_old``, since the op's backward reads it); the value is written into self, which takes the node."""
    if self._view is not None:
        return _inplace_on_view(self, run, keep_old)
    old_data = self._data.copy() if keep_old else self._data
    source = Tensor._make(old_data, self._requires_grad, self._grad_fn, self._output_nr)
    result = run(source)
    check_overlap(self._data)
    _write(self, result._data)
    if result._grad_fn is not None:
        if result._data.dtype != self._data.dtype:
            _keep_input_dtypes(result)
        _rebind(self, result)
    return self


def _keep_input_dtypes(result: Tensor) -> None:
    """The node computed in a wider dtype than the tensor it now belongs to, so its gradient will arrive in the
    tensor's dtype: its inputs recorded as "like the output" must name their own dtype for the engine to cast to."""
    node = result._grad_fn
    own = (result._data.shape, result._data.dtype)
    node._input_meta = tuple(own if m is SAME_AS_OUTPUT else m for m in node._input_meta)


def _inplace_on_view(view: Tensor, run, keep_old: bool) -> Tensor:
    """An in-place op through a view, recorded as PyTorch does: the view's new value is written into the storage,
    the root takes a ``CopySlices`` node holding the op's node, and the view's grad_fn becomes an
    ``AsStridedBackward0`` of that node."""
    _check_view(view, None)
    refresh_view(view)
    root, chain = view_chain(view)
    old_data = view._data.copy() if keep_old else view._data
    source = Tensor._make(old_data, view._requires_grad, view._grad_fn, view._output_nr)
    new_value = run(source)
    check_overlap(view._data)
    _write(view, new_value._data)
    if new_value._grad_fn is None:
        return view
    if new_value._data.dtype != view._data.dtype:
        _keep_input_dtypes(new_value)
    node = copy_slices(root, chain, view, source, new_value)
    _rebind(root, Tensor._make(root._data, True, node))
    view._view_version = -1  # made again from the root's new node on its next use
    refresh_view(view)
    return view


_UFUNCS = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide"}


def arithmetic_inplace(self: Tensor, name: str, other, alpha=1, rounding_mode=math.ROUNDING_NOT_GIVEN) -> Tensor:
    """``add_``, ``sub_``, ``mul_``, ``div_``: a ufunc writing into the storage when no graph is recorded."""
    if rounding_mode is not math.ROUNDING_NOT_GIVEN:
        return function_inplace(self, math.div, other, rounding_mode=rounding_mode)
    if isinstance(other, Tensor) and type(other._data) is not type(self._data):
        raise device_error((self, other))
    if alpha != 1 and name in ("add", "sub") and _in_graph(self, (other,)):
        # one node with alpha inside, as PyTorch records it
        return function_inplace(self, math.add if name == "add" else math.sub, other, alpha=alpha)
    if alpha != 1:
        other = math.mul(other, alpha)
    if _in_graph(self, (other,)):
        cls = {"add": math.Add, "sub": math.Sub, "mul": math.Mul, "div": math.Div}[name]
        return apply_inplace(self, cls, other)
    data = self._data
    xp = xp_of(data)
    value = other._data if isinstance(other, Tensor) else other
    try:
        getattr(xp, _UFUNCS[name])(data, value, out=data)
    except TypeError:
        raise RuntimeError(f"result type of {name}_ can't be cast to the desired output type {data.dtype}") from None
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
    if isinstance(value, (int, float)):
        value = stored_value(value, self._data.dtype)
    if not isinstance(value, (Tensor, bool, int, float)):
        value = Tensor._make(xp_of(self._data).asarray(value, dtype=self._data.dtype))
    if isinstance(value, Tensor) and type(value._data) is not type(self._data):
        raise device_error((self, value))
    advanced = kind not in ("select", "slice")
    if advanced and isinstance(value, Tensor) and value._data.dtype != self._data.dtype:
        # PyTorch fills through a single boolean mask with a 0-d value (masked_fill_, which casts); every other
        # advanced index goes to index_put_, which does not cast
        if value._data.ndim or not _single_mask(key):
            raise RuntimeError(
                f"Index put requires the source and destination dtypes match, got {scalar_name(self)} for the "
                f"destination and {scalar_name(value)} for the source."
            )
    try:
        integral = (
            kind_of(self._data.dtype) not in "fc"
            and isinstance(value, Tensor)
            and value._requires_grad
            and _fills(self, index, value, advanced)
        )
        if _in_graph(self, (value,), integral, _view_step(index)):
            _record_setitem(self, index, kind, value)
            return
        data = self._data
        if 0 in getattr(data, "strides", (1,)) and not advanced:
            check_overlap(data[index])
        _writable(data)[index] = value._data if isinstance(value, Tensor) else value
    except ValueError:
        _check_value_shape(self._data, index, advanced, value)
        raise
    self._version_counter[0] += 1


def _view_step(index) -> str | None:
    """The node of the view PyTorch takes before writing ``x[index] = value`` (None when it writes into ``x``
    itself: a full slice, an ellipsis, an advanced index alone)."""
    name = None
    for p in index if isinstance(index, tuple) else (index,):
        if p is None:
            name = "UnsqueezeBackward0"
        elif isinstance(p, (int, np.integer)) and not isinstance(p, bool):
            name = "SelectBackward0"
        elif isinstance(p, slice) and p != slice(None):
            name = "SliceBackward0"
    return name


def _fills(self: Tensor, index, value: Tensor, advanced: bool) -> bool:
    """Whether PyTorch writes ``value`` with fill_ (a 0-d value into a region with dimensions, or through a mask),
    which keeps even an integer tensor in the graph."""
    return value._data.ndim == 0 and (advanced or self._data[index].ndim > 0)


def _record_setitem(self: Tensor, index, kind: str, value) -> None:
    parts = index if isinstance(index, tuple) else (index,)
    if all(p is Ellipsis or (isinstance(p, slice) and p == slice(None)) for p in parts):
        # the whole tensor: PyTorch records a fill_ for a number or a 0-d tensor, a copy_ otherwise
        if not isinstance(value, Tensor):
            value = Tensor._make(xp_of(self._data).asarray(value, dtype=self._data.dtype))
        if value._data.ndim == 0 and self._data.ndim:
            apply_inplace(self, copy.FillTensor, value)
        else:
            self.copy_(value)
        return
    cls = IndexPut if kind in ("mask", "index") else SetItem
    check_overlap(self._data)
    _record(self, lambda source: cls.apply(source, value, index=index), 0 in cls.save_inputs)


def _single_mask(key) -> bool:
    """Whether the only tensor in an index is a boolean mask (integers and slices besides it)."""
    parts = key if isinstance(key, tuple) else (key,)
    kinds = [
        (kind_of(p._data.dtype), p._data.ndim) if isinstance(p, Tensor) else (kind_of(np.asarray(p).dtype), 1)
        for p in parts
        if isinstance(p, (Tensor, list, np.ndarray)) or type(p) is bool
    ]
    tensors = [k for k, ndim in kinds if ndim or k == "b"]  # a 0-d integer tensor selects, as an int does
    return tensors == ["b"]


def _check_value_shape(data, index, advanced: bool, value) -> None:
    """PyTorch's RuntimeError for a value whose shape does not fit the indexed region (NumPy raises ValueError)."""
    have = tuple(getattr(value._data if isinstance(value, Tensor) else value, "shape", ()))
    want = tuple(data[index].shape)
    if advanced:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(have)} cannot be broadcast to indexing "
            f"result of shape {list(want)}"
        ) from None
    trimmed = have
    while len(trimmed) > len(want) and trimmed[0] == 1:  # PyTorch drops a value's leading ones first
        trimmed = trimmed[1:]
    if len(trimmed) > len(want):
        raise RuntimeError(
            f"expand({legacy_type_name(value)}{{{list(have)}}}, size={list(want)}): the number of "
            f"sizes provided ({len(want)}) must be greater or equal to the number of dimensions in "
            f"the tensor ({len(trimmed)})"
        ) from None
    for i in range(1, len(trimmed) + 1):
        if trimmed[-i] != 1 and trimmed[-i] != want[-i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({want[-i]}) must match the existing size ({trimmed[-i]}) at "
                f"non-singleton dimension {len(want) - i}.  Target sizes: {list(want)}.  Tensor sizes: "
                f"{list(trimmed)}"
            ) from None
