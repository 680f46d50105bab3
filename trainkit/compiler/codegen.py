"""Straight-line Python for a plan: what ``replay`` does, written out once per plan and compiled.

``replay.replay`` walks a plan's steps in a loop, looking each one up; for a plan replayed many times that loop
and its look-ups cost more than the small kernels they call. ``generate`` writes the same steps as one Python
function: a local variable per slot (``a12``) and per gradient (``g3``), the op classes, nodes, constants and
shapes as globals of the function, each kernel called directly. For a region that runs its own backward, each op
gets one node kept with the code and reused from call to call (its saved arrays are set anew each time); a compiled
forward makes fresh nodes, since its backward may run after the next call. The function does exactly what
``replay`` does, in the same order, with the same kernels: the numbers are the same, bit for bit.

>>> import trainkit
>>> f = trainkit.compile(lambda x: (x * 2).sum())
>>> _ = f(trainkit.ones(2)), f(trainkit.ones(2)), f(trainkit.ones(2))  # captured, replayed, then written out
>>> "def run(" in f.entries[0].plan.code.source
True
"""

from __future__ import annotations

import numpy as np

from ..autograd.backend import as_array
from ..autograd.grad_buffer import accumulate, fit_to_input
from ..autograd.grad_mode import no_grad
from ..autograd.tensor import Tensor
from ..layers.module import Module
from ..optim.optimizer import Optimizer
from .plan import BackwardStep, FuncStep, OpStep
from .state import locate

_new = object.__new__
_COMPILED: dict = {}  # source -> code object


class Code:
    """A plan's generated function ``run(arg_tensors, recompute)`` and, for a compiled forward,
    ``back(nodes, grads)``."""

    def __init__(self, source: str, run, back):
        self.source, self.run, self.back = source, run, back


class _Writer:
    def __init__(self, plan, run_call, rebuild, boundary_node, spent_node, deliver):
        self.plan = plan
        self.names: dict = {
            "np": np,
            "ndarray": np.ndarray,
            "as_array": as_array,
            "accumulate": accumulate,
            "fit": fit_to_input,
            "new": _new,
            "make": Tensor._make,
            "no_grad": no_grad,
            "Z": [0],
            "run_call": run_call,
            "rebuild": rebuild,
            "boundary_node": boundary_node,
            "spent_node": spent_node,
            "deliver": deliver,
            "locate": locate,
            "PLAN": plan,
        }
        self.lines: list = []
        self.persistent = plan.boundary is None  # nodes reused across calls only when backward runs inside
        self.tensors = set(plan.args) | {s for s, _ in plan.externals}  # slots with a tensor local (t12)

    def const(self, prefix: str, value) -> str:
        name = f"{prefix}{len(self.names)}"
        self.names[name] = value
        return name

    def emit(self, line: str, depth: int = 1) -> None:
        self.lines.append("    " * depth + line)


def generate(plan, run_call, rebuild, boundary_node, spent_node, deliver=None) -> Code:
    """The straight-line functions of ``plan`` (see the module's docstring)."""
    w = _Writer(plan, run_call, rebuild, boundary_node, spent_node, deliver)
    w.emit("def run(arg_tensors, recompute):", 0)
    arg_slots = list(plan.args)
    for i, s in enumerate(arg_slots):
        w.emit(f"t{s} = arg_tensors[{i}]")
        w.emit(f"a{s} = t{s}._data")
    externals = []
    for s, t in plan.externals:
        if any(s == slot for slot, *_ in plan.located):
            continue
        name = w.const("E", t)
        externals.append((s, name))
        w.emit(f"t{s} = {name}")
        w.emit(f"a{s} = {name}._data")
    for s, *place in plan.located:  # state carried from the previous call, found where the region keeps it
        externals.append((s, f"t{s}"))
        w.emit(f"t{s} = locate(*{w.const('L', tuple(place))})")
        w.emit(f"a{s} = t{s}._data")
    node_of: dict = {}
    for step in plan.steps:
        if type(step) is OpStep:
            _forward(w, step, node_of)
        elif type(step) is BackwardStep:
            _backward(w, step, node_of)
        elif type(step) is FuncStep:
            args = [f"make(a{i})" if type(i) is int else w.const("K", i.value) for i in step.inputs]
            args += [f"{key}={w.const('K', value)}" for key, value in step.kwargs.items()]
            w.emit(f"a{step.out} = {w.const('FN', step.fn)}({', '.join(args)})._data")
            for s in step.frees:
                w.emit(f"a{s} = None")
        elif step.kind == "set_grad":
            w.emit(f"t{step.target}.grad = None")
        elif step.kind == "whole":
            _whole(w, step)
            for s, name in externals:
                w.emit(f"a{s} = {name}._data")
        else:
            _call(w, step)
            for s, name in externals:
                w.emit(f"a{s} = {name}._data")
    inputs = [*plan.args, *(s for s, _ in plan.externals)]
    kept = sorted(_slots(plan.result) | {s for s, _ in plan.outputs} | set(plan.saved_inputs))
    w.emit("env = {" + ", ".join(f"{s}: a{s}" for s in kept) + "}")
    w.emit("tensors = {" + ", ".join(f"{s}: t{s}" for s in inputs) + "}")
    if plan.boundary is not None:
        nodes = ", ".join(f"{k}: {node_of[k]}" for k in sorted(node_of))
        w.emit(f"node = boundary_node(PLAN, env, tensors, {{{nodes}}}, recompute)")
    elif plan.outputs:
        w.emit("node = spent_node(PLAN, env)")
    else:
        w.emit("node = None")
    w.emit(f"return {'deliver(PLAN, ' if plan.stores else '('}rebuild(PLAN.result, env, tensors, node))")
    if plan.boundary is not None:
        w.emit("", 0)
        w.emit("def back(nodes, grads):", 0)
        grads = [f"grads[{i}]" for i in range(len(plan.outputs))]
        _schedule(w, plan.boundary, {k: f"nodes[{k}]" for k in node_of}, grads)
        w.emit("return (" + "".join(f"x{i}, " for i in range(len(plan.boundary.exits))) + ")")
    source = "\n".join(w.lines) + "\n"
    scope = dict(w.names)
    code = _COMPILED.get(source)
    if code is None:  # a model built again (a new run, a new fit) gives the same source: compiled once
        code = _COMPILED[source] = compile(source, "<trainkit.compile plan>", "exec")
        while len(_COMPILED) > 64:
            del _COMPILED[next(iter(_COMPILED))]
    exec(code, scope)  # noqa: S102 - our own generated code
    return Code(source, scope["run"], scope.get("back"))


def _is_input(plan, s: int) -> bool:
    return s in plan.args or any(s == e for e, _ in plan.externals)


def _slots(shape) -> set:
    if shape[0] in ("in", "out"):
        return {shape[1]}
    if shape[0] == "v":
        return set()
    items = [v for _, v in shape[1]] if shape[0] is dict else list(shape[1])
    return set().union(*(_slots(v) for v in items)) if items else set()


_REPLAY_CLASSES: dict = {}


def replay_class(cls: type) -> type:
    """``cls`` with ``saved_tensors`` a plain attribute: the generated code sets the tuple of arrays the op's
    backward unpacks, where ``Op.apply`` keeps versioned entries that ``saved_tensors`` checks and unpacks (no
    tensor outside the replay can reach these arrays, so there is no version to check).

    >>> from trainkit.autograd.ops.math import Mul
    >>> node = object.__new__(replay_class(Mul)); node.saved_tensors = (1, 2); node.saved_tensors
    (1, 2)
    """
    sub = _REPLAY_CLASSES.get(cls)
    if sub is None:
        sub = _REPLAY_CLASSES[cls] = type(cls.__name__, (cls,), {"saved_tensors": (), "__module__": cls.__module__})
    return sub


def _forward(w: _Writer, step: OpStep, node_of: dict) -> None:
    k = step.index
    names = [f"a{i}" if type(i) is int else w.const("K", i.value) for i in step.inputs]
    keys = {key: w.const("K", value) for key, value in step.params.items()}
    for key, s, shape in step.refs:
        keys[key] = f"a{s}" if shape is None else f"a{s}.reshape({w.const('H', shape)})"
    call = [*names, *(f"{key}={value}" for key, value in keys.items())]
    if step.prepare is not None:  # work the op's function does on arrays before apply (prepared.py)
        given = ", ".join(f"{key!r}: {value}" for key, value in keys.items())
        w.emit(f"pp = {w.const('P', step.prepare)}([{', '.join(names)}], {{{given}}})")
        call.append("**pp")
    persistent = w.persistent or not step.backward
    if persistent:  # one node for every call: its forward bound once
        node = w.const("N", _node(step))
        forward = w.const("F", w.names[node].forward)
    else:
        node = f"n{k}"
        w.emit(f"{node} = new({w.const('C', replay_class(step.cls))})")
        forward = f"{node}.forward"
    outs = step.outs
    target = "o" if step.multi else f"a{outs[0]}"
    w.emit(f"{target} = {forward}({', '.join(call)})")
    checked = not w.plan.seen.get(k, False)  # whether the op returned something else than an ndarray once
    if step.multi:
        for j, s in enumerate(outs):
            w.emit(f"a{s} = o[{j}]")
            if checked:
                w.emit(f"if type(a{s}) is not ndarray: a{s} = as_array(a{s})")
    elif checked:
        w.emit(f"if type({target}) is not ndarray: {target} = as_array({target})")
    if step.backward:
        if not persistent:
            w.emit(f"{node}.next_functions = {w.const('ED', step.edges)}")
            w.emit(f"{node}._input_meta = {w.const('M', step.meta)}")
            if step.multi:
                w.emit(f"{node}.num_outputs = {step.num_outputs}")
                w.emit(f"{node}._output_meta = {w.const('OM', step.output_meta)}")
        out = f"a{outs[0]}"
        entries = [out if i is not None and i < 0 else "None" if i is None else names[i] for i in step.saved]
        if step.after is not None:  # what the op's function adds to the node after apply (prepared.py)
            entries.append(f"*{w.const('AF', step.after)}({node})")
        w.emit(f"{node}.saved_tensors = ({', '.join(entries)}{',' if len(entries) == 1 else ''})")
        node_of[k] = node
    for s in step.bumps:
        w.emit(f"t{s}._version_counter[0] += 1")
    for s in step.frees:
        w.emit(f"a{s} = None")


def _call(w: _Writer, step) -> None:
    """An optimizer's update of one group, or ``zero_grad``: the same calls ``Optimizer.step`` and ``zero_grad``
    make, written out (an overridden ``zero_grad`` or one that zeroes in place is called as it is)."""
    if step.kind == "update":
        method, index = step.args
        opt = w.const("O", step.target)
        w.emit(f"grp = {opt}.param_groups[{index}]")
        w.emit('ps = [p for p in grp["params"] if p._grad is not None]')
        w.emit("if ps:")
        w.emit("with no_grad():", 2)
        w.emit(f"{w.const('U', method)}({opt}, grp, ps)", 3)
        w.emit("grp = ps = None")
        return
    if step.kind == "zero_grad":
        method, args, kwargs = step.args
        to_none = all(v is True for v in (*args, *kwargs.values()))
        if to_none and method is Optimizer.zero_grad:
            w.emit(f"for grp in {w.const('O', step.target)}.param_groups:")
            w.emit('for p in grp["params"]:', 2)
            w.emit("p._grad = None", 3)
            w.emit("grp = p = None")
            return
        if to_none and method is Module.zero_grad:
            w.emit(f"for p in {w.const('O', step.target)}.parameters():")
            w.emit("p._grad = None", 2)
            w.emit("p = None")
            return
    w.emit(f"run_call({w.const('S', step)})")


def _whole(w: _Writer, step) -> None:
    """A ``replayed_whole`` function called again, its arguments found as the replay has them."""
    fn, args, kwargs = step.args
    call = f"{w.const('W', fn)}(*{_value(w, args)}, **{_value(w, kwargs)})"
    if step.out is None:
        w.emit(call)
    else:
        w.emit(f"t{step.out} = {call}")
        w.emit(f"a{step.out} = t{step.out}._data")
        w.tensors.add(step.out)


def _value(w: _Writer, spec) -> str:
    """Python for an argument ``capture.whole_spec`` described."""
    kind = spec[0]
    if kind == "s":
        return f"t{spec[1]}" if spec[1] in w.tensors else f"make(a{spec[1]})"
    if kind in ("h", "v"):
        return w.const("K", spec[1])
    if kind is dict:
        return "{" + ", ".join(f"{w.const('K', k)}: {_value(w, v)}" for k, v in spec[1]) + "}"
    items = "".join(f"{_value(w, v)}, " for v in spec[1])
    return f"({items})" if kind is tuple else f"[{items}]"


def _node(step: OpStep):
    node = _new(replay_class(step.cls))
    node.next_functions = step.edges
    node._input_meta = step.meta
    if step.multi:
        node.num_outputs = step.num_outputs
        node._output_meta = step.output_meta
    return node


def _backward(w: _Writer, step: BackwardStep, node_of: dict) -> None:
    root = f"a{step.root}"
    if step.gradient is None:
        w.emit(f"seed = np.empty({root}.shape, {root}.dtype) if type({root}) is ndarray else {root}.copy()")
        w.emit("seed.fill(1)")
    else:
        w.emit(f"seed = a{step.gradient}")
        w.emit(f"if seed.dtype != {root}.dtype: seed = seed.astype({root}.dtype)")
    state = _schedule(w, step.schedule, dict(node_of), ["seed"])
    w.emit("seed = None")
    for i, (slot, _, _) in enumerate(step.schedule.exits):
        # the local is the array's only holder but for accumulate's own: .grad takes it over without a copy
        if state.get(f"x{i}") in ("set", "own"):
            w.emit(f"accumulate(t{slot}, x{i}, False)")
        else:
            w.emit(f"if x{i} is not None: accumulate(t{slot}, x{i}, False)")
        w.emit(f"x{i} = None")
    for slot, leaf in step.grads_out:
        w.tensors.add(slot)
        w.emit(f"t{slot} = t{leaf}._grad")
        w.emit(f"a{slot} = None if t{slot} is None else t{slot}._data")


def _schedule(w: _Writer, sched, nodes: dict, seeds: list) -> dict:
    """The backward walk: ``g{n}`` the summed gradient of a node's output, ``x{n}`` of an exit. Where the first
    replay saw a gradient arrive (not None, of its input's shape and dtype), the code adds it unchecked; the
    state of each variable says whether it surely holds an array ("set"), one this code summed and may add into
    ("own"), or maybe None ("maybe"; absent: None)."""
    seen = w.plan.seen
    key = id(sched)
    state: dict = {}
    for n in range(sched.n_grads):
        w.emit(f"g{n} = None")
    for n in range(len(sched.exits)):
        w.emit(f"x{n} = None")
    for (slot, _, _), seed in zip(sched.seeds, seeds):
        w.emit(f"g{slot} = {seed}")
        state[f"g{slot}"] = "set"
    for n, (k, outs, deliveries) in enumerate(sched.steps):
        node = nodes[k]
        backward = w.const("B", w.names[node].backward) if node in w.names else f"{node}.backward"
        sure = all(state.get(f"g{o}") in ("set", "own") for o in outs)
        depth = 1 if sure else 2
        if len(outs) == 1:
            if not sure:
                w.emit(f"if g{outs[0]} is not None:")
            w.emit(f"r = {backward}(g{outs[0]})", depth)
        else:
            if not sure:
                w.emit(f"if {' or '.join(f'g{o} is not None' for o in outs)}:")
            zeros = ", ".join(
                f"g{o}"
                if state.get(f"g{o}") in ("set", "own")
                else f"np.zeros({w.const('H', shape)}, {w.const('D', dtype)}) if g{o} is None else g{o}"
                for o, (shape, dtype) in zip(outs, w.plan.steps[k].out_shapes)
            )
            w.emit(f"r = {backward}({zeros})", depth)
        w.emit(" = ".join(f"g{o}" for o in outs) + " = None", depth)
        if node in w.names:  # a node kept from call to call lets go of its arrays once run, as the engine frees them
            w.emit(f"{node}.saved_tensors = ()", depth)
            w.emit(f"{node}.extra = None", depth)
        is_tuple = seen.get((key, n))
        if is_tuple is None:
            w.emit("if type(r) is not tuple: r = (r,)", depth)
        for j, (i, dest, to_exit, shape, dtype) in enumerate(deliveries):
            var = f"{'x' if to_exit else 'g'}{dest}"
            value = f"r[{i}]" if is_tuple is not False else "r"
            was_none, fits, _ = seen.get((key, n, j), (True, True, False))
            if not was_none and not fits and sure:
                if state.get(var) == "own":  # a sum this code made: added into in place, as the engine does
                    w.emit(f"{var} += {value}", depth)
                elif state.get(var) == "set":
                    w.emit(f"{var} = {var} + {value}", depth)
                    state[var] = "own"
                    continue
                elif state.get(var) is None:
                    w.emit(f"{var} = {value}", depth)
                else:
                    w.emit(f"{var} = {value} if {var} is None else {var} + {value}", depth)
                state[var] = state.get(var) if state.get(var) == "own" else "set"
                continue
            sh, dt = w.const("H", shape), w.const("D", dtype)
            w.emit(f"gi = {value}", depth)
            w.emit("if gi is not None:", depth)
            w.emit(f"if gi.shape != {sh} or gi.dtype != {dt}: gi = fit(gi, {sh}, {dt}, False)", depth + 1)
            w.emit(f"{var} = gi if {var} is None else {var} + gi", depth + 1)
            w.emit("gi = None", depth)
            state[var] = "set" if state.get(var) in ("set", "own") else "maybe"
        w.emit("r = None", depth)
    return state
