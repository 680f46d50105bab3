"""The backward engine: graph nodes and the one loop that runs them.

A graph is made of nodes. Each op result's ``grad_fn`` is a node; ``node.next_functions`` points at the nodes of its
inputs (an ``AccumulateGrad`` for a leaf, ``None`` for an input that needs no grad). Edges point from outputs to
inputs only, and a node keeps its saved tensors but never its own outputs, so a graph has no reference cycles: it
dies with the last tensor that reaches it.

``run_backward`` counts, for every node reachable from the roots, how many edges lead into it; a node is ready once
all of them have delivered their gradient. Ready nodes run from a heap, newest first, as PyTorch's engine does. Each
node runs once; its saved tensors are freed as soon as it has run (unless ``retain_graph``).

In the ordinary pass gradients are plain arrays and no graph is built. With ``create_graph`` they are Tensors and
the pass runs in grad mode, so the same ``backward`` code records a graph of itself (see ``ops.dual``).
"""

from __future__ import annotations

import heapq
import itertools
import sys
import threading
import weakref

from . import grad_mode
from .backend import as_array, xp_of

_next_seq = itertools.count().__next__
_LAST = 1 << 62  # AccumulateGrad runs as soon as it is ready, as in PyTorch


class _EngineState(threading.local):
    create_graph = False
    detect_anomaly = False


_engine = _EngineState()

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook (safe to call twice, or from the hook)."""

    __slots__ = ("_hooks_ref", "id")
    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self._hooks_ref = weakref.ref(hooks)
        self.id = next(RemovableHandle._ids)

    def remove(self) -> None:
        hooks = self._hooks_ref()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _add_hook(hooks: dict, fn) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


class HookDict(dict):
    """Hooks by handle id, in registration order (a dict subclass, so that handles can refer to it weakly)."""


class NodeHooks:
    """The hooks one node carries. ``tensor`` and ``retain`` are keyed by output number."""

    __slots__ = ("tensor", "retain", "pre", "post")

    def __init__(self):
        self.tensor: dict[int, HookDict] = {}
        self.retain: dict[int, weakref.ref] = {}
        self.pre = HookDict()
        self.post = HookDict()


class SavedOutput:
    """Stands in a node's saved values for one of its own outputs (which it must not hold: that is a cycle)."""

    __slots__ = ("nr",)

    def __init__(self, nr: int):
        self.nr = nr


OUTPUT0 = SavedOutput(0)


class _SameAsOutput:
    """The ``_input_meta`` entry of an input with the shape and dtype of the node's only output."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SAME_AS_OUTPUT"


# Most inputs of element-wise ops are shaped like the output. Recording that as one shared marker, rather than a
# (shape, dtype) pair per input, spares two tuples per edge that would live as long as the graph (and that the
# garbage collector would visit), and lets the engine pass an output's gradient on to such an input unchecked.
SAME_AS_OUTPUT = _SameAsOutput()
ALL_SAME = [(SAME_AS_OUTPUT,) * n for n in range(8)]  # ALL_SAME[n]: the _input_meta of n such inputs, shared


class Node:
    """A step of the backward graph. Subclasses define ``backward(*grad_outputs)`` returning one grad per input.

    ``next_functions``: one ``(node or None, output_nr)`` per input, as in PyTorch. ``_input_meta``: the shape and
    dtype of each input that needs a grad (or ``SAME_AS_OUTPUT`` when they are those of the node's only output), so
    that the engine (and only the engine) sums broadcast gradients back to the input's shape and casts them to its
    dtype.
    """

    # Defaults live on the class so that creating a node costs one allocation; a graph node gets its own
    # next_functions, _input_meta and _seq when it is connected.
    next_functions: tuple = ()
    _input_meta: tuple = ()
    _seq = 0
    _saved = None
    extra = None  # arrays a backward needs that are not tensors (masks, indices); freed with _saved
    _hooks: NodeHooks | None = None
    _freed = False
    num_outputs = 1

    def __init__(self):
        self._seq = _next_seq()

    def name(self) -> str:
        """The node's class name, as PyTorch reports it (``MulBackward0``)."""
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    @property
    def metadata(self) -> dict:
        """A dict of your own to attach information to this node."""
        return self.__dict__.setdefault("_metadata", {})

    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        """One flag per input: does that input want a gradient?"""
        return tuple(fn is not None for fn, _ in self.next_functions)

    @property
    def saved_tensors(self) -> tuple:
        """The saved values, checked against in-place changes: arrays in the plain pass, Tensors with create_graph."""
        saved = self._saved
        if saved is None:
            if self._freed:
                raise RuntimeError(FREED_MESSAGE)
            return ()
        if not _engine.create_graph:
            arrays = []  # a plain loop: this runs once per node and pass, and a generator costs twice as much
            for entry in saved:
                if entry is None:
                    arrays.append(None)
                elif entry[3][0] != entry[2]:
                    self._raise_modified(entry)
                else:
                    arrays.append(entry[1])
            return tuple(arrays)
        out = []
        for entry in saved:
            if entry is None:  # not saved: no wanted gradient needs it
                out.append(None)
                continue
            tensor, array, version, counter = entry
            if counter[0] != version:
                self._raise_modified(entry)
            if type(tensor) is SavedOutput:
                # re-attached to this node only now, so that the node never holds its own outputs
                out.append(_tensor_mod.Tensor._make(array, True, self, tensor.nr, counter))
            else:
                out.append(tensor)
        return tuple(out)

    def _raise_modified(self, entry) -> None:
        _, array, version, counter = entry
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an inplace "
            f"operation: [{array.dtype} tensor of shape {tuple(array.shape)}], saved by {self.name()}, "
            f"is at version {counter[0]}; expected version {version} instead. Hint: the tensor was "
            "changed in place after this op used it; change a clone() instead, or make the change "
            "out of place."
        )

    def _hooks_or_new(self) -> NodeHooks:
        if self._hooks is None:
            self._hooks = NodeHooks()
        return self._hooks

    def register_hook(self, fn) -> RemovableHandle:
        """Call ``fn(grad_inputs, grad_outputs)`` after this node runs; a returned tuple replaces grad_inputs."""
        return _add_hook(self._hooks_or_new().post, fn)

    def register_prehook(self, fn) -> RemovableHandle:
        """Call ``fn(grad_outputs)`` before this node runs; a returned tuple replaces grad_outputs."""
        return _add_hook(self._hooks_or_new().pre, fn)

    def backward(self, *grad_outputs):
        raise NotImplementedError(f"{self.name()} has no backward")


class AccumulateGrad(Node):
    """The node of a leaf that requires grad: adds the incoming gradient into ``variable.grad``."""

    def __init__(self, variable):
        super().__init__()
        self.variable = variable
        self._seq = _LAST + self._seq
        self._hooks = variable._hooks  # the leaf's own hooks: they run before accumulation


def _owned(g) -> bool:
    """Whether ``g``, held only by the engine's local and passed on through ``_accumulate``, is ours to keep: an
    array that owns its memory, or a C-contiguous view of the whole of an array that nothing else holds (the
    transpose of a transposed product)."""
    if sys.getrefcount(g) > _SOLE_REFS[0]:
        return False
    flags = g.flags
    if not getattr(flags, "writeable", True):  # a broadcast view, or an array its maker froze
        return False
    base = g.base
    if base is None:
        return True
    # the base must own its memory: one made over a buffer (frombuffer, another library's array) belongs elsewhere
    return (type(base) is type(g) and base.size == g.size and flags.c_contiguous and base.flags.owndata
            and sys.getrefcount(base) <= _SOLE_REFS[1])


def _refcounts(g) -> tuple[int, int]:
    """What ``_owned`` sees of ``g`` and of its base, from a frame like its own."""
    base = g.base
    return sys.getrefcount(g), sys.getrefcount(base)


def _sole_refcounts() -> tuple[int, int]:
    """The counts ``_owned`` sees when nothing else holds the array: measured through the same chain of frames as
    the engine's (a local here, a parameter in ``_accumulate``'s stand-in), so that they hold on any Python, whatever
    it counts for locals and arguments."""

    def through_accumulate(g):
        return _refcounts(g)

    view = as_array(0.0).copy().reshape(1)  # held by this local only, and its base by the view only
    return through_accumulate(view)


_SOLE_REFS = _sole_refcounts()


def sum_to(g, shape: tuple):
    """Sum array ``g`` down to ``shape`` (undoing broadcasting); never returns a view, so the result is owned."""
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return as_array(g)


def _to_input(g, meta, create: bool):
    """Bring a gradient to its input's shape and dtype: the one place broadcasting and casting are undone."""
    shape, dtype = meta
    if g.shape != shape:
        if create:
            from .ops.shape import SumTo

            g = SumTo.apply(g, shape=shape)
        else:
            g = sum_to(g, shape)
    if g.dtype != dtype:
        g = g.to(_tensor_mod.dtype_of(dtype)) if create else g.astype(dtype)
    return g


def _wrap(g):
    return _tensor_mod.Tensor._make(as_array(g))


def _call_tensor_hooks(hooks: dict, g, create: bool):
    """Run tensor hooks in registration order, each on the previous one's result."""
    for fn in tuple(hooks.values()):
        t = g if create else _wrap(g)
        result = fn(t)
        if result is not None:
            if not isinstance(result, _tensor_mod.Tensor):
                raise TypeError(f"a tensor hook must return None or a Tensor, got {type(result).__name__}")
            if tuple(result.shape) != tuple(g.shape):
                raise RuntimeError(
                    f"hook '{getattr(fn, '__name__', fn)}' has changed the size of value: "
                    f"expected {tuple(g.shape)}, got {tuple(result.shape)}"
                )
            if result.dtype != (g.dtype if create else _tensor_mod.dtype_of(g.dtype)):
                raise RuntimeError(
                    f"hook '{getattr(fn, '__name__', fn)}' has changed the type of value "
                    f"(was {g.dtype}, got {result.dtype}); return a gradient of the tensor's own dtype"
                )
            g = result if create else result._data
    return g


def _retain(ref: weakref.ref, g, create: bool) -> None:
    tensor = ref()
    if tensor is None:
        return
    if create:
        tensor._grad = g if tensor._grad is None else tensor._grad + g
    elif tensor._grad is None:
        tensor._grad = _wrap(g)
    else:
        tensor._grad = _wrap(tensor._grad._data + g)


def _run_pre_hooks(hooks: NodeHooks, grads: list, n: int, create: bool) -> list:
    for nr, tensor_hooks in hooks.tensor.items():
        if tensor_hooks and grads[nr] is not None:
            grads[nr] = _call_tensor_hooks(tensor_hooks, grads[nr], create)
    for nr, ref in hooks.retain.items():
        if grads[nr] is not None:
            _retain(ref, grads[nr], create)
    for fn in tuple(hooks.pre.values()):
        result = fn(tuple(None if g is None else (g if create else _wrap(g)) for g in grads[:n]))
        if result is not None:
            grads[:n] = [None if r is None else (r if create else r._data) for r in result]
    return grads


def _run_post_hooks(hooks: NodeHooks, grad_inputs: tuple, grad_outputs: list, create: bool) -> tuple:
    def wrap_all(gs):
        return tuple(None if g is None else (g if create else _wrap(g)) for g in gs)

    for fn in tuple(hooks.post.values()):
        result = fn(wrap_all(grad_inputs), wrap_all(grad_outputs))
        if result is not None:
            grad_inputs = tuple(None if r is None else (r if create else r._data) for r in result)
    return grad_inputs


def _accumulate(leaf, g, create: bool) -> None:
    """Add ``g`` into ``leaf.grad``; the first time, take the array over when nothing else holds it."""
    old = leaf._grad
    if create:
        leaf._grad = g if old is None else old + g
    elif old is None:
        # Only the caller's local, this parameter and _owned's own hold g when it is ours to keep.
        leaf._grad = _tensor_mod.Tensor._make(g if _owned(g) else g.copy())
    else:
        old._data += g
        old._version_counter[0] += 1


def _count_dependencies(roots) -> dict:
    """For every node reachable from ``roots``, the roots included: how many edges lead into it."""
    deps = dict.fromkeys(roots, 0)
    stack = list(roots)
    while stack:
        for nxt, _ in stack.pop().next_functions:
            if nxt is not None:
                if nxt in deps:
                    deps[nxt] += 1
                else:  # first met: walk on from it
                    deps[nxt] = 1
                    stack.append(nxt)
    return deps


def _needed_nodes(roots, targets: set) -> set:
    """Nodes that lie on a path from a root to a target: only these run when ``autograd.grad`` asks for inputs."""
    needed: set = set()
    done: set = set()
    stack = [(fn, False) for fn in roots]
    while stack:
        fn, children_done = stack.pop()
        if children_done:
            if any(nxt is not None and (nxt in needed or nxt in targets) for nxt, _ in fn.next_functions):
                needed.add(fn)
            continue
        if fn in done:
            continue
        done.add(fn)
        stack.append((fn, True))
        stack.extend((nxt, False) for nxt, _ in fn.next_functions if nxt is not None and nxt not in done)
    return needed


def run_backward(roots, root_grads, retain_graph: bool, create_graph: bool, capture=None):
    """Run the graph backward from ``roots`` (``(node, output_nr)`` pairs) seeded with ``root_grads``.

    With ``capture`` (a list of ``(node, output_nr)``) nothing is accumulated into ``.grad``: the gradient
    arriving at each captured place is returned instead, for ``autograd.grad``.
    """
    root_nodes = [roots[0][0]] if len(roots) == 1 else list(dict.fromkeys(fn for fn, _ in roots))
    deps = _count_dependencies(root_nodes)
    needed = targets = None
    captured: dict = {}
    if capture is not None:
        targets = {fn for fn, _ in capture}
        needed = _needed_nodes(root_nodes, targets)

    # buffers[node]: its incoming grads, then one flag per output saying "this array is ours to add into".
    buffers: dict = {}
    for (fn, nr), g in zip(roots, root_grads):
        buf = buffers.get(fn)
        if buf is None:
            buf = buffers[fn] = [None] * (2 * fn.num_outputs)
        buf[nr] = g if buf[nr] is None else buf[nr] + g
    ready = [(-fn._seq, fn) for fn in root_nodes if deps[fn] == 0]
    heapq.heapify(ready)

    anomaly = _engine.detect_anomaly  # read once per pass, not once per node
    prev_mode, prev_create = grad_mode._state.enabled, _engine.create_graph
    grad_mode._state.enabled = _engine.create_graph = create_graph
    heappop, heappush = heapq.heappop, heapq.heappush
    try:
        while ready:
            fn = heappop(ready)[1]
            if needed is not None and fn not in needed and fn not in targets:
                continue
            buf = buffers.pop(fn, None)
            n = fn.num_outputs
            hooks = fn._hooks
            if hooks is not None and buf is not None:
                buf = _run_pre_hooks(hooks, buf, n, create_graph)

            if capture is not None and fn in targets:
                for nr in range(n):
                    if buf is not None and buf[nr] is not None:
                        captured[(fn, nr)] = buf[nr]
                if fn not in needed:
                    continue

            if type(fn) is AccumulateGrad:
                if buf is not None and buf[0] is not None:
                    g = buf[0]
                    buf = None
                    _accumulate(fn.variable, g, create_graph)
                    g = None
                    post = fn.variable._post_accumulate_hooks
                    if post:
                        for hook in tuple(post.values()):
                            hook(fn.variable)
                continue

            gout = out_meta = None  # the output's gradient, and its shape and dtype once asked for
            if buf is None or (buf[0] is None if n == 1 else all(g is None for g in buf[:n])):
                grad_inputs = (None,) * len(fn.next_functions)
            else:
                gout = buf[0]
                if fn._freed:
                    raise RuntimeError(FREED_MESSAGE)
                if n == 1:
                    grad_inputs = fn.backward(buf[0])
                else:
                    grad_inputs = fn.backward(*_materialize(fn, buf[:n], create_graph))
                if type(grad_inputs) is not tuple:
                    grad_inputs = (grad_inputs,)
                if anomaly:
                    _check_finite(fn, grad_inputs)
                if hooks is not None and hooks.post:
                    grad_inputs = _run_post_hooks(hooks, grad_inputs, buf[:n], create_graph)
                if not retain_graph and (fn._saved is not None or fn.extra is not None):
                    fn._saved = fn.extra = None
                    fn._freed = True
            buf = None

            for (nxt, nr), g, meta in zip(fn.next_functions, grad_inputs, fn._input_meta):
                if nxt is None or (needed is not None and nxt not in needed and nxt not in targets):
                    continue
                if g is not None:
                    if meta is SAME_AS_OUTPUT:
                        if g is gout:  # the output's gradient passed on as it is: it has the right shape and dtype
                            meta = None
                        else:
                            if out_meta is None:
                                a = gout._data if create_graph else gout
                                out_meta = (a.shape, a.dtype)
                            meta = out_meta
                    if meta is not None and (g.shape != meta[0] or g.dtype != meta[1]):
                        g = _to_input(g, meta, create_graph)
                    nbuf = buffers.get(nxt)
                    if nbuf is None:
                        m = nxt.num_outputs
                        if m == 1:
                            buffers[nxt] = [g, False]
                        else:
                            nbuf = buffers[nxt] = [None] * (2 * m)
                            nbuf[nr] = g
                    else:
                        old = nbuf[nr]
                        if old is None:
                            nbuf[nr] = g
                        elif nbuf[nxt.num_outputs + nr] and old.size != 1:
                            # ours to add into; but a new array is cheaper for one element, where NumPy's in-place
                            # add costs twice as much
                            old += g
                        else:
                            nbuf[nr] = old + g
                            nbuf[nxt.num_outputs + nr] = not create_graph
                left = deps[nxt] - 1
                deps[nxt] = left
                if left == 0:
                    heappush(ready, (-nxt._seq, nxt))
            # hold no grad past its use: a leaf may take it over without a copy
            grad_inputs = g = old = gout = out_meta = a = None
    finally:
        grad_mode._state.enabled, _engine.create_graph = prev_mode, prev_create
    return captured


def _check_finite(fn: Node, grads: tuple) -> None:
    """Under ``detect_anomaly``: name the node whose backward produced NaN, as PyTorch does."""
    for i, g in enumerate(grads):
        if g is None:
            continue
        data = g._data if isinstance(g, _tensor_mod.Tensor) else g
        if bool(xp_of(data).isnan(data).any()):
            raise RuntimeError(f"Function '{fn.name()}' returned nan values in its {i}th output.")


def _materialize(fn: Node, grads: list, create: bool) -> list:
    """Multi-output nodes get zeros for outputs that received no gradient (as PyTorch's Functions do, unless they
    called ``ctx.set_materialize_grads(False)``)."""
    if all(g is not None for g in grads) or not getattr(fn, "_materialize", True):
        return grads
    shapes = fn._output_meta
    out = []
    for g, (shape, dtype, xp) in zip(grads, shapes):
        if g is None:
            z = xp.zeros(shape, dtype)
            g = _tensor_mod.Tensor._make(z) if create else z
        out.append(g)
    return out


def array_module(g):
    """The array module of a gradient (array or Tensor)."""
    return xp_of(g._data if isinstance(g, _tensor_mod.Tensor) else g)


# Last: tensor.py imports this module's names, and this module needs the Tensor class only at run time.
from . import tensor as _tensor_mod  # noqa: E402
