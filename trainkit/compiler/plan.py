"""What a captured region becomes: a flat list of steps on raw arrays, and the backward schedule.

A region is run once eagerly while ``capture`` notes what it does; the notes become a ``Plan``:

- every tensor the region touches gets a *slot*, an index into the list of arrays a replay works on: the tensor
  arguments, the tensors it found (parameters, buffers, tensors of a closure), and each op's results;
- each op becomes an ``OpStep``: its class, which slots (or constants) it reads, its keyword arguments, which slots
  it writes. Replaying it calls the op's own ``forward`` on the arrays: the same kernel eager mode runs, without
  the Tensor and graph bookkeeping around it;
- each ``backward()`` becomes a ``BackwardStep`` whose ``Schedule`` lists the nodes in the order the engine runs
  them (a heap of creation numbers, newest first), where each input gradient goes, and the shape and dtype it is
  summed back and cast to, all decided at capture;
- an optimizer update and the clearing of gradients become ``CallStep``s that call the optimizer on the arrays the
  backward left in ``.grad``.

>>> Plan.__name__
'Plan'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from heapq import heappop, heappush

from ..autograd.engine import Node, count_dependencies
from ..autograd.saved import SAME_AS_OUTPUT


class _Wanted(Node):
    """Stands in a replayed node's ``next_functions`` for an input that wants a gradient (the real node of the
    capture is not kept: it would hold the capture's graph alive)."""


WANTED = _Wanted()


class Refused(Exception):
    """Raised inside capture: the region cannot be replayed; the message says why."""


class Const:
    """An op input that is not a tensor (a number, None): passed on as it is."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(eq=False)
class OpStep:
    """One op: ``outs = cls.forward(*inputs, **params)`` on arrays.

    ``inputs``: a slot number or a ``Const`` per positional input; ``params``: the keyword arguments that are
    constants; ``refs``: ``(name, slot, shape)`` for keyword arguments that are a slot's array (reshaped to
    ``shape`` unless None). ``saved``: for an op some backward runs through, what its node keeps: per entry the
    input index, -1 for its output, None for nothing; ``edges``/``meta``: the node's ``next_functions`` (which
    inputs want a gradient) and ``_input_meta``, as ``_connect`` made them at capture.
    """

    cls: type
    inputs: tuple
    params: dict
    refs: tuple
    outs: tuple
    multi: bool
    index: int = 0
    backward: bool = False
    saved: tuple | None = None
    edges: tuple = ()
    meta: tuple = ()
    num_outputs: int = 1
    output_meta: tuple = ()
    out_shapes: tuple = ()
    frees: tuple = ()
    after: object = None
    bumps: tuple = ()
    prepare: object = None


@dataclass(eq=False)
class FuncStep:
    """A tensor function without a gradient that makes its result outside ``Op.apply`` (comparisons,
    ``argmax``, ``detach``): replayed by calling it on tensors around the slots' arrays. ``inputs`` as
    ``OpStep``'s (positional arguments), ``kwargs`` constants, ``out`` the result's slot."""

    fn: object
    inputs: tuple
    kwargs: dict
    out: int
    shape: tuple = ()
    frees: tuple = ()


@dataclass(eq=False)
class Schedule:
    """The backward of one pass: ``steps`` in the engine's order, each ``(op index, gradient slots of its
    outputs, deliveries)``; a delivery is ``(input index, destination, to an exit, shape, dtype)``. Gradients of
    tensors from outside the region (leaves, inputs with a history) end in ``exits``: ``(slot, shape, dtype)``."""

    steps: list = field(default_factory=list)
    n_grads: int = 0
    seeds: list = field(default_factory=list)  # (gradient slot, root slot, output nr)
    exits: list = field(default_factory=list)


@dataclass(eq=False)
class BackwardStep:
    """``root.backward(gradient)`` inside a region: the schedule, where the seed comes from (None: ones), and the
    slots the leaves' ``.grad`` arrays fill afterwards (``(grad slot, leaf slot)``)."""

    schedule: Schedule
    root: int
    gradient: int | None
    grads_out: tuple = ()


@dataclass(eq=False)
class CallStep:
    """A call the plan makes as eager code would: ``update`` (one optimizer group's update on the arrays in
    ``.grad``), ``zero_grad`` (an optimizer's or module's), ``set_grad`` (``tensor.grad = None``), ``whole`` (a
    function marked ``replayed_whole``, such as gradient clipping: ``args`` is ``(fn, args, kwargs)`` described as
    ``whole_spec`` does, ``out`` the slot of the tensor it returns, if any)."""

    kind: str
    target: object
    args: tuple = ()
    text: str = ""
    out: int | None = None


@dataclass(eq=False)
class Plan:
    """A replayable region. ``args``: the slots of the tensor arguments in order; ``externals``: ``(slot,
    tensor)`` for tensors found in the region; ``consts``: the list of slot values a replay starts from;
    ``steps``: ``OpStep``/``BackwardStep``/``CallStep`` in order; ``result``: how to rebuild the return value;
    ``boundary``: the backward schedule of the outputs when the region ends before its backward (a module's
    forward), else None."""

    n_slots: int
    args: tuple
    externals: tuple
    steps: list
    result: object
    boundary: Schedule | None = None
    outputs: tuple = ()  # (slot, requires grad, output nr of the boundary node or -1)
    guards: object = None
    notes: list = field(default_factory=list)
    saved_inputs: tuple = ()
    stores: tuple = ()  # (container, key): where the region keeps state for its next call (state.carried)
    located: tuple = ()  # (slot, container, key, path): the state it read from there, found anew at each replay
    code: object = None  # codegen.Code: the plan as straight-line Python, made after the first replay
    seen: dict = field(default_factory=dict)  # what the first replay found (see replay.run_schedule)


def schedule(roots: list, seeds: list, op_of: dict, slot_of_input) -> Schedule:
    """The engine's order for a backward from ``roots`` (``(node, output nr, root slot)``), as ``run_backward``
    would take it: every node reachable counts the edges into it, and the ready ones run newest first. Nodes of
    ops in the region (``op_of``: id(node) -> OpStep) become steps; any other node is an exit, named by the slot of
    the tensor whose edge reaches it (``slot_of_input(step, i)``)."""
    plan = Schedule()
    nodes = list(dict.fromkeys(fn for fn, _, _ in roots))
    buffers = count_dependencies(nodes)
    grad_slot: dict = {}

    def gslot(fn, nr) -> int:
        key = (id(fn), nr)
        if key not in grad_slot:
            grad_slot[key] = plan.n_grads
            plan.n_grads += 1
        return grad_slot[key]

    exit_of: dict = {}
    for (fn, nr, slot), seed in zip(roots, seeds):
        if id(fn) not in op_of:
            raise Refused("backward() starts from a tensor the region did not make")
        plan.seeds.append((gslot(fn, nr), slot, seed))
    ready: list = []
    for fn in nodes:
        if buffers[fn].waiting == 0:
            heappush(ready, (-fn._seq, id(fn), fn))
    while ready:
        fn = heappop(ready)[2]
        step = op_of.get(id(fn))
        if step is None:
            continue  # an exit: its gradient leaves the plan
        step.backward = True
        outs = tuple(gslot(fn, nr) for nr in range(fn.num_outputs))
        deliveries = []
        for i, ((nxt, nr), meta) in enumerate(zip(fn.next_functions, fn._input_meta)):
            if nxt is None:
                continue
            shape, dtype = (
                (step.out_shapes[0] if meta is SAME_AS_OUTPUT else meta[:2]) if meta is not None else (None, None)
            )
            if id(nxt) in op_of:
                deliveries.append((i, gslot(nxt, nr), False, shape, dtype))
            else:
                key = (id(nxt), nr)
                if key not in exit_of:
                    exit_of[key] = len(plan.exits)
                    plan.exits.append((slot_of_input(step, i), shape, dtype))
                deliveries.append((i, exit_of[key], True, shape, dtype))
            buf = buffers[nxt]
            buf.waiting -= 1
            if buf.waiting == 0:
                heappush(ready, (-nxt._seq, id(nxt), nxt))
        plan.steps.append((step.index, outs, tuple(deliveries)))
    return plan


def liveness(plan: Plan, keep: set) -> None:
    """Give each ``OpStep`` the slots it may drop once it has run (``frees``): arrays no later step reads and the
    result does not return, so that a replay holds no more than eager mode (the nodes keep what backward needs)."""
    last: dict = {}
    for n, step in enumerate(plan.steps):
        if isinstance(step, (OpStep, FuncStep)):
            for i in step.inputs:
                if type(i) is int:
                    last[i] = n
        if isinstance(step, FuncStep):
            last.setdefault(step.out, n)
        if isinstance(step, OpStep):
            for _, s, _ in step.refs:
                last[s] = n
            for s in step.outs:
                last.setdefault(s, n)
        elif isinstance(step, BackwardStep):
            for s in (step.root, step.gradient):
                if s is not None:
                    last[s] = n
        elif isinstance(step, CallStep) and step.kind == "whole":  # the slots among its arguments
            for s in _spec_slots(step.args[1:]):
                last[s] = n
    drops: dict = {}
    for s, n in last.items():
        if s not in keep:
            drops.setdefault(n, []).append(s)
    for n, step in enumerate(plan.steps):
        if isinstance(step, (OpStep, FuncStep)):
            step.frees = tuple(drops.get(n, ()))


def _spec_slots(spec) -> list:
    """The slots named in a ``capture.whole_spec`` description (or a tuple of them)."""
    if isinstance(spec, tuple) and spec and spec[0] == "s":
        return [spec[1]]
    if isinstance(spec, tuple) and spec and spec[0] in (list, tuple, dict):
        return [s for v in spec[1] for s in _spec_slots(v[1] if spec[0] is dict else v)]
    if isinstance(spec, tuple) and spec and spec[0] in ("h", "v"):
        return []
    return [s for v in spec for s in _spec_slots(v)]


def build(rec, result, guards, stored: tuple = ()) -> Plan:
    """The plan of a finished capture (``rec``: a ``capture.Recorder``) whose region returned ``result`` and left
    ``stored`` where it keeps state for its next call (then the plan's result describes ``(result, *stored)``)."""
    inputs = set(rec.args) | {s for s, _ in rec.externals}
    outputs: list = []
    passes = [s for s in rec.steps if isinstance(s, BackwardStep)]

    shape = _spec(result, rec, inputs, outputs, passes)
    if stored:
        shape = (tuple, (shape, *(_spec(v, rec, inputs, outputs, passes, True) for v in stored)))
    boundary = None
    if outputs and not passes:
        rec.check_nodes(rec.steps)
        boundary = schedule(outputs, [None] * len(outputs), rec.op_of, rec.input_slot)
    plan = Plan(
        n_slots=len(rec.tensors),
        args=rec.args,
        externals=tuple(rec.externals),
        steps=rec.steps,
        result=shape,
        boundary=boundary,
        outputs=tuple((slot, nr) for _, nr, slot in outputs),
        guards=guards,
    )
    keep = inputs | {slot for _, _, slot in outputs} | _returned(shape)
    for step in rec.steps:
        if isinstance(step, BackwardStep):
            keep |= {g for g, _ in step.grads_out}
    liveness(plan, keep)
    # the inputs whose in-place change before the boundary's backward eager mode would refuse: those saved by a
    # node, directly or through a view (which shares their version counter)
    saved = {
        rec.view_of.get(step.inputs[i], step.inputs[i])
        for step in rec.steps
        if isinstance(step, OpStep) and step.backward and step.saved
        for i in step.saved
        if i is not None and i >= 0 and type(step.inputs[i]) is int
    }
    plan.saved_inputs = tuple(sorted(saved & inputs))
    for step in rec.steps:
        if isinstance(step, OpStep):
            step.node = None  # the capture's graph may go
    return plan


def _spec(x, rec, inputs: set, outputs: list, passes: list, stored: bool = False):
    """How to rebuild the value ``x`` the region returned: ``("in", slot)`` for a tensor it was given or found,
    ``("out", slot, nr)`` for one an op made (``nr``: its output number on the boundary node, -1 without
    history), containers of those, ``("v", value)`` for anything else. A ``stored`` tensor (state kept for the
    next call) may have a history the region's backward did not run through, if it leads into that backward's
    freed graph: a backward from it would fail in eager mode as on the node a replay gives it."""
    if hasattr(x, "_data") and hasattr(x, "_version_counter"):
        slot = rec.slot_of.get(id(x))
        if slot is None:
            raise Refused("the region returns a tensor no op made (trainkit.zeros(...) and the like)")
        if slot in inputs:
            return ("in", slot)
        node = x._grad_fn if x._requires_grad else None
        if node is not None and id(node) not in rec.op_of:
            raise Refused("the region returns a tensor whose history the compiler did not record")
        if node is not None and passes and not rec.op_of[id(node)].backward and not (stored and _spent(node, rec)):
            raise Refused("the region returns a tensor with history that its own backward() did not use")
        nr = -1
        if node is not None:
            nr = next((n for n, (_, _, s) in enumerate(outputs) if s == slot), len(outputs))
            if nr == len(outputs):  # a tensor returned twice (or returned and stored) is one output
                outputs.append((node, x._output_nr, slot))
        return ("out", slot, nr)
    if isinstance(x, (list, tuple)):
        return (type(x), tuple(_spec(v, rec, inputs, outputs, passes, stored) for v in x))
    if isinstance(x, dict):
        return (dict, tuple((k, _spec(v, rec, inputs, outputs, passes, stored)) for k, v in x.items()))
    return ("v", x)


def _spent(node, rec) -> bool:
    """Whether a node's graph reaches a node of the region that its backward ran through (and freed)."""
    stack, seen = [node], set()
    while stack:
        fn = stack.pop()
        step = rec.op_of.get(id(fn))
        if step is None or id(fn) in seen:
            continue
        if step.backward:
            return True
        seen.add(id(fn))
        stack.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)
    return False


def _returned(shape) -> set:
    if shape[0] in ("in", "out"):
        return {shape[1]}
    if shape[0] == "v":
        return set()
    if shape[0] is dict:
        return set().union(*(_returned(v) for _, v in shape[1])) if shape[1] else set()
    return set().union(*(_returned(v) for v in shape[1])) if shape[1] else set()
