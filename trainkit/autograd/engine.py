"""The backward engine: graph nodes and the one loop that runs them.

A graph is made of nodes. Each op result's ``grad_fn`` is a node; ``node.next_functions`` points at the nodes of its
inputs (an ``AccumulateGrad`` for a leaf, ``None`` for an input that needs no grad). Edges point from outputs to
inputs only, and a node keeps its saved tensors but never its own outputs, so a graph has no reference cycles: it
dies with the last tensor that reaches it.

``run_backward`` counts, for every node reachable from the roots, how many edges lead into it; a node is ready once
all of them have delivered their gradient. Ready nodes run from a heap, newest first, as PyTorch's engine does. Each
node runs once; its saved tensors are freed as soon as it has run (unless ``retain_graph``). Gradients are brought
to their input's shape and dtype here, once, not in every op.

In the ordinary pass gradients are plain arrays and no graph is built. With ``create_graph`` they are Tensors and
the pass runs in grad mode, so the same ``backward`` code records a graph of itself (see ``ops.dual``).
"""

from __future__ import annotations

import heapq
import itertools
import weakref

from . import grad_mode
from .backend import as_array, dtype_of, sum_to
from .hooks import NodeHookMethods, NodeHooks, run_post_hooks, run_pre_hooks
from .ownership import owned
from .saved import SAME_AS_OUTPUT, freed_message, unpack
from .tensor import Tensor

next_seq = itertools.count().__next__
_LAST = 1 << 62  # AccumulateGrad runs as soon as it is ready, as in PyTorch
observers: list = []  # opt-in watchers (autograd.explore.record), called with the root nodes before a pass


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
        self._seq = next_seq()

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

    saved_tensors = property(unpack, doc="The saved values, checked against in-place changes (see ``saved``).")

    # the hook methods of hooks.py, as class attributes: a base class would lengthen every node's MRO, which costs
    # each attribute lookup that misses the type cache
    _hooks_or_new, register_hook, register_prehook = (NodeHookMethods._hooks_or_new, NodeHookMethods.register_hook,
                                                      NodeHookMethods.register_prehook)

    def backward(self, *grad_outputs):
        raise NotImplementedError(f"{self.name()} has no backward")


class AccumulateGrad(Node):
    """The node of a leaf that requires grad: adds the incoming gradient into ``variable.grad``."""

    def __init__(self, variable):
        super().__init__()
        self.variable = variable
        self._seq = _LAST + self._seq
        self._hooks = variable._hooks  # the leaf's own hooks: they run before accumulation


def accumulator(leaf: Tensor) -> AccumulateGrad:
    """The leaf's ``AccumulateGrad``: the live one if any (the leaf holds it weakly, graphs hold it), else a new one."""
    acc = leaf._acc() if leaf._acc is not None else None
    if acc is None:
        acc = AccumulateGrad(leaf)
        leaf._acc = weakref.ref(acc)
    return acc


def _to_input(g, meta, create: bool):
    """Bring a gradient to its input's shape and dtype: the one place broadcasting and casting are undone."""
    shape, dtype = meta
    if g.shape != shape:
        g = g.sum_to_size(shape) if create else sum_to(g, shape)
    if g.dtype != dtype:
        g = g.to(dtype_of(dtype)) if create else g.astype(dtype)
    return g


def _same(g):
    return g


def _wrap(g) -> Tensor:
    return Tensor._make(as_array(g))


def _unwrap(t: Tensor):
    return t._data


def accumulate(leaf, g, create: bool) -> None:
    """Add ``g`` into ``leaf.grad``; the first time, take the array over when nothing else holds it."""
    old = leaf._grad
    if create:
        leaf._grad = g if old is None else old + g
    elif old is None:
        # Only the caller's local, this parameter and owned's own hold g when it is ours to keep.
        leaf._grad = Tensor._make(g if owned(g) else g.copy())
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
    for observe in observers:  # empty unless a recorder listens: the pass then costs one loop over nothing
        observe(root_nodes)
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
    heappop, heappush = heapq.heappop, heapq.heappush
    wrap, unwrap = (_same, _same) if create_graph else (_wrap, _unwrap)  # hooks see Tensors, not arrays
    anomaly = grad_mode.state.anomaly  # read once per pass, not once per node
    prev = grad_mode.enter_backward(create_graph)
    try:
        while ready:
            fn = heappop(ready)[1]
            if needed is not None and fn not in needed and fn not in targets:
                continue
            buf = buffers.pop(fn, None)
            n = fn.num_outputs
            hooks = fn._hooks
            if hooks is not None and buf is not None:
                buf = run_pre_hooks(hooks, buf, n, wrap, unwrap)
            if capture is not None and fn in targets:
                captured.update(((fn, nr), buf[nr]) for nr in range(n) if buf is not None and buf[nr] is not None)
                if fn not in needed:  # a target may also lie on the way to another one
                    continue
            if type(fn) is AccumulateGrad:
                if buf is not None and buf[0] is not None:
                    g = buf[0]
                    buf = None
                    accumulate(fn.variable, g, create_graph)
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
                    raise RuntimeError(freed_message(fn))
                grad_inputs = fn.backward(gout) if n == 1 else fn.backward(*_materialize(fn, buf[:n], create_graph))
                if type(grad_inputs) is not tuple:
                    grad_inputs = (grad_inputs,)
                if anomaly:
                    grad_mode.check_finite(fn, grad_inputs)
                if hooks is not None and hooks.post:
                    grad_inputs = run_post_hooks(hooks, grad_inputs, buf[:n], wrap, unwrap)
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
                        own = (len(nbuf) >> 1) + nr  # its flag (reading nxt.num_outputs costs several times more)
                        if old is None:
                            nbuf[nr] = g
                        elif nbuf[own] and old.size != 1:
                            # ours to add into; but a new array is cheaper for one element, where NumPy's in-place
                            # add costs twice as much
                            old += g
                        else:
                            nbuf[nr] = old + g
                            nbuf[own] = not create_graph
                left = deps[nxt] - 1
                deps[nxt] = left
                if left == 0:
                    heappush(ready, (-nxt._seq, nxt))
            # hold no grad past its use: a leaf may take it over without a copy
            grad_inputs = g = old = gout = out_meta = a = None
    finally:
        grad_mode.exit_backward(prev, create_graph)
    return captured


def _materialize(fn: Node, grads: list, create: bool) -> list:
    """Multi-output nodes get zeros for outputs that received no gradient (as PyTorch's Functions do, unless they
    called ``ctx.set_materialize_grads(False)``)."""
    if all(g is not None for g in grads) or not getattr(fn, "_materialize", True):
        return grads
    zeros = [xp.zeros(shape, dtype) for shape, dtype, xp in fn._output_meta]
    return [(Tensor._make(z) if create else z) if g is None else g for g, z in zip(grads, zeros)]
