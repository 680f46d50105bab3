"""The backward engine: graph nodes and the one loop that runs them.

A graph is made of nodes. Each op result's ``grad_fn`` is a node; ``node.next_functions`` points at the nodes of its
inputs (an ``AccumulateGrad`` for a leaf, ``None`` for an input that needs no grad). Edges point from outputs to
inputs only, and a node keeps its saved tensors but never its own outputs, so a graph has no reference cycles: it
dies with the last tensor that reaches it.

``run_backward`` counts, for every node reachable from the roots, how many edges lead into it; a node is ready once
all of them have delivered their gradient. Ready nodes run from a heap, newest first, as PyTorch's engine does. Each
node runs once; its saved tensors are freed as soon as it has run (unless ``retain_graph``). Gradients are brought
to their input's shape and dtype here, once, not in every op, and summed per node in a ``GradBuffer``
(``grad_buffer.py``, with the accumulation into a leaf's ``.grad``).

In the ordinary pass gradients are plain arrays and no graph is built. With ``create_graph`` they are Tensors and
the pass runs in grad mode, so the same ``backward`` code records a graph of itself (see ``ops.dual``).
"""

from __future__ import annotations

import itertools
import weakref
from heapq import heapify, heappop, heappush

from . import grad_mode
from .backend import as_array
from .grad_buffer import GradBuffer, accumulate, fit_to_input
from .hooks import NodeHookMethods, NodeHooks, run_post_hooks, run_pre_hooks
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
    _hooks_or_new, register_hook, register_prehook = (
        NodeHookMethods._hooks_or_new,
        NodeHookMethods.register_hook,
        NodeHookMethods.register_prehook,
    )

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


def count_dependencies(roots) -> dict:
    """A ``GradBuffer`` for every node reachable from ``roots``, the roots included, waiting for as many gradients
    as there are edges leading into the node."""
    buffers = {fn: GradBuffer(fn.num_outputs) for fn in roots}
    stack = list(roots)
    while stack:
        for nxt, _ in stack.pop().next_functions:
            if nxt is None:
                continue
            buf = buffers.get(nxt)
            if buf is None:  # first met: walk on from it
                buf = buffers[nxt] = GradBuffer(nxt.num_outputs)
                stack.append(nxt)
            buf.waiting += 1
    return buffers


def needed_nodes(roots, targets: set) -> set:
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
        stack.append((fn, True))  # decided once all its inputs are
        stack.extend((nxt, False) for nxt, _ in fn.next_functions if nxt is not None and nxt not in done)
    return needed


def run_backward(roots, root_grads, retain_graph: bool, create_graph: bool, capture=None) -> dict:
    """Run the graph backward from ``roots`` (``(node, output_nr)`` pairs) seeded with ``root_grads``.

    With ``capture`` (a list of ``(node, output_nr)``) nothing is accumulated into ``.grad``: the gradient
    arriving at each captured place is returned instead, for ``autograd.grad``.

    >>> import trainkit
    >>> x = trainkit.tensor([1.0, 2.0], requires_grad=True)
    >>> y = (x * x).sum()
    >>> run_backward([(y.grad_fn, 0)], [trainkit.ones(()).numpy()], False, False); x.grad
    {}
    tensor([2., 4.])
    """
    root_nodes = [roots[0][0]] if len(roots) == 1 else list(dict.fromkeys(fn for fn, _ in roots))
    for observe in observers:  # empty unless a recorder listens: the pass then costs one loop over nothing
        observe(root_nodes)
    task = _GraphTask(root_nodes, retain_graph, create_graph, capture)
    for (fn, nr), g in zip(roots, root_grads):
        task.buffers[fn].add(nr, g, create_graph)
    prev = grad_mode.enter_backward(create_graph)
    try:
        task.run()
    finally:
        grad_mode.exit_backward(prev, create_graph)
    return task.captured


def _same(g):
    return g


def _wrap(g) -> Tensor:
    return Tensor._make(as_array(g))


def _unwrap(t: Tensor):
    return t._data


class _GraphTask:
    """One backward pass: the nodes left to run, the gradients on their way to them, and the pass's settings
    (PyTorch's ``GraphTask``)."""

    __slots__ = ("buffers", "ready", "retain", "create", "anomaly", "hooks_see", "targets", "needed", "captured")

    def __init__(self, root_nodes: list, retain_graph: bool, create_graph: bool, capture):
        self.buffers = count_dependencies(root_nodes)  # node -> its GradBuffer, until the node runs
        self.ready = [(-fn._seq, fn) for fn in root_nodes if self.buffers[fn].waiting == 0]  # a heap: newest first
        heapify(self.ready)
        self.retain = retain_graph
        self.create = create_graph
        self.anomaly = grad_mode.state.anomaly  # read once per pass, not once per node
        # hooks see Tensors: in the plain pass the gradients are arrays, wrapped for them and unwrapped after
        self.hooks_see = (_same, _same) if create_graph else (_wrap, _unwrap)
        self.captured: dict = {}
        self.targets = self.needed = None  # both None unless autograd.grad captures
        if capture is not None:
            self.targets = {fn for fn, _ in capture}
            self.needed = needed_nodes(root_nodes, self.targets)

    def wants(self, fn: Node) -> bool:
        """When capturing: whether ``fn`` is a target or on the way to one (no other node gets gradients)."""
        return fn in self.needed or fn in self.targets

    def run(self) -> None:
        """Run the ready nodes, newest first, until none is left."""
        ready, buffers, capturing = self.ready, self.buffers, self.needed is not None
        while ready:
            fn = heappop(ready)[1]
            grads = buffers.pop(fn).grads
            if capturing and not self.wants(fn):
                continue  # a root on no path to the inputs asked for
            if fn._hooks is not None and _received(grads):
                run_pre_hooks(fn._hooks, grads, fn.num_outputs, *self.hooks_see)
            if capturing and fn in self.targets:
                self.captured.update(((fn, nr), g) for nr, g in enumerate(grads) if g is not None)
                if fn not in self.needed:  # a target may also lie on the way to another one
                    continue
            if type(fn) is AccumulateGrad:
                self.accumulate_leaf(fn, grads)
            else:
                self.run_node(fn, grads)

    def accumulate_leaf(self, fn: AccumulateGrad, grads: list) -> None:
        """Add the gradient that reached a leaf into its ``.grad``, then run its post-accumulate hooks."""
        g = grads[0]
        if g is None:
            return
        grads[0] = None  # owned() counts references: this local must be the only one left to the array
        accumulate(fn.variable, g, self.create)
        del g
        post = fn.variable._post_accumulate_hooks
        if post:
            for hook in tuple(post.values()):
                hook(fn.variable)

    def run_node(self, fn: Node, grads: list) -> None:
        """Run ``fn``'s backward on the summed gradients of its outputs and pass the results on. A node that
        received no gradient runs nothing, but still lets the nodes after it run."""
        if grads[0] is None if len(grads) == 1 else not _received(grads):  # _received(), without a call for one
            self.pass_on(fn, (None,) * len(fn.next_functions), None)
            return
        if fn._freed:
            raise RuntimeError(freed_message(fn))
        if len(grads) == 1:
            grad_inputs = fn.backward(grads[0])
        else:
            grad_inputs = fn.backward(*_materialize(fn, grads, self.create))
        if type(grad_inputs) is not tuple:
            grad_inputs = (grad_inputs,)
        if self.anomaly:
            grad_mode.check_finite(fn, grad_inputs)
        if fn._hooks is not None and fn._hooks.post:
            grad_inputs = run_post_hooks(fn._hooks, grad_inputs, grads, *self.hooks_see)
        if not self.retain and (fn._saved is not None or fn.extra is not None):
            fn._saved = fn.extra = None  # the graph's memory goes as backward walks through it
            fn._freed = True
        self.pass_on(fn, grad_inputs, grads[0])

    def pass_on(self, fn: Node, grad_inputs: tuple, gout) -> None:
        """Add each input gradient of ``fn`` to the buffer of that input's node, shaped and typed as the input, and
        queue that node once every edge into it has delivered. ``gout`` is ``fn``'s output gradient."""
        buffers, capturing, create = self.buffers, self.needed is not None, self.create
        for (nxt, nr), g, meta in zip(fn.next_functions, grad_inputs, fn._input_meta):
            if nxt is None or (capturing and not self.wants(nxt)):
                continue
            buf = buffers[nxt]
            if g is not None:
                if meta is not SAME_AS_OUTPUT:
                    if g.shape != meta[0] or g.dtype is not meta[1] and g.dtype != meta[1]:
                        g = fit_to_input(g, meta[0], meta[1], create)
                elif g is not gout:  # gout itself has the output's shape and dtype, and needs no check
                    out = gout._data if create else gout
                    if g.shape != out.shape or g.dtype is not out.dtype and g.dtype != out.dtype:
                        g = fit_to_input(g, out.shape, out.dtype, create)
                if buf.grads[nr] is None:
                    buf.grads[nr] = g  # the first gradient, kept as add() would keep it, without the call
                else:
                    buf.add(nr, g, create)
            buf.waiting -= 1
            if buf.waiting == 0:
                heappush(self.ready, (-nxt._seq, nxt))


def _received(grads: list) -> bool:
    """Whether any gradient reached the node of these buffered ``grads``."""
    return grads[0] is not None if len(grads) == 1 else any(g is not None for g in grads)


def _materialize(fn: Node, grads: list, create: bool) -> list:
    """Multi-output nodes get zeros for outputs that received no gradient (as PyTorch's Functions do, unless they
    called ``ctx.set_materialize_grads(False)``)."""
    if all(g is not None for g in grads) or not getattr(fn, "_materialize", True):
        return grads
    zeros = [xp.zeros(shape, dtype) for shape, dtype, xp in fn._output_meta]
    return [(Tensor._make(z) if create else z) if g is None else g for g, z in zip(grads, zeros)]
