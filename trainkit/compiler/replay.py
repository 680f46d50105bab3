"""Replay: run a plan on new arrays, and the one graph node a compiled forward's outputs carry.

A replay fills the plan's slots with the arrays of the call's tensor arguments and of the tensors the region
reads, then runs the steps: each op's ``forward`` on a bare node of its class (no Tensor, no graph edges), with the
node keeping what its ``backward`` reads exactly as ``Op.apply`` would have it keep; each backward pass walks its
schedule, calling the nodes' ``backward`` and summing each gradient into its destination in the engine's order,
fitted to the input's shape and dtype as the engine would; leaves get their gradient through the engine's own
``accumulate`` (so ``.grad`` accumulates, and is taken over without a copy when nothing else holds it).

When the region ends before its backward (a module's forward), the outputs carry one ``CompiledFunctionBackward``
node whose backward runs the plan's boundary schedule; the engine passes its results on to the inputs and
parameters as it would for any node.
"""

from __future__ import annotations

import numpy as np

from ..autograd import grad_mode
from ..autograd.api import grad as autograd_grad
from ..autograd.backend import as_array
from ..autograd.engine import Node, accumulator
from ..autograd.grad_buffer import accumulate, fit_to_input
from ..autograd.graph import tensors_in
from ..autograd.tensor import Tensor
from .capture import whole_value
from .plan import BackwardStep, CallStep, FuncStep, OpStep
from .state import locate, put

_new = object.__new__
_ZERO = [0]  # the version counter of a replay's saved arrays: nothing outside the replay can reach them
_ndarray = np.ndarray


def run_op(step: OpStep, env: list, nodes: list, tensors: list, seen: dict) -> None:
    """One op's forward on the slots' arrays; its node is kept when a backward runs through it. ``seen`` notes
    what the code generated later may take for granted (the kind of array each op returns)."""
    arrays = [env[i] if type(i) is int else i.value for i in step.inputs]
    params = step.params
    if step.refs or step.prepare is not None:
        params = dict(params)
        for key, s, shape in step.refs:
            params[key] = env[s] if shape is None else env[s].reshape(shape)
        if step.prepare is not None:
            params.update(step.prepare(arrays, params))
    node = _new(step.cls)
    out = node.forward(*arrays, **params) if params else node.forward(*arrays)
    seen[step.index] = (type(out) is _ndarray) if not step.multi else all(type(o) is _ndarray for o in out)
    if step.multi:
        out = tuple(o if type(o) is _ndarray else as_array(o) for o in out)
        for s, o in zip(step.outs, out):
            env[s] = o
    else:
        if type(out) is not _ndarray:
            out = as_array(out)
        env[step.outs[0]] = out
    if step.backward:
        node.next_functions = step.edges
        node._input_meta = step.meta
        if step.multi:
            node.num_outputs = step.num_outputs
            node._output_meta = step.output_meta
        node._saved = [None if i is None else (None, out if i < 0 else arrays[i], 0, _ZERO) for i in step.saved]
        if step.after is not None:  # what the op's function adds to the node after apply (prepared.py)
            node._saved.extend((None, a, 0, _ZERO) for a in step.after(node))
        nodes[step.index] = node
    for s in step.bumps:  # arrays the op updated in place (running statistics): their tensors' versions move on
        tensors[s]._version_counter[0] += 1
    for s in step.frees:
        env[s] = None


def run_func(step: FuncStep, env: list) -> None:
    """A tensor function without a gradient, called on tensors around the slots' arrays."""
    args = [Tensor._make(env[i]) if type(i) is int else i.value for i in step.inputs]
    env[step.out] = step.fn(*args, **step.kwargs)._data
    for s in step.frees:
        env[s] = None


def run_schedule(sched, nodes: list, seeds, seen: dict) -> list:
    """Walk a backward schedule from ``seeds`` (one gradient array per root); return the gradients of its exits.
    ``seen`` notes, per node, whether its backward returned a tuple and, per gradient it passed on, whether it was
    None and whether it had to be summed or cast to its input's shape and dtype."""
    grads = [None] * sched.n_grads
    for (slot, _, _), g in zip(sched.seeds, seeds):
        grads[slot] = g if grads[slot] is None else grads[slot] + g
    exits = [None] * len(sched.exits)
    for n, (k, outs, deliveries) in enumerate(sched.steps):
        node = nodes[k]
        nodes[k] = None
        if len(outs) == 1:
            g = grads[outs[0]]
            grads[outs[0]] = None
            if g is None:
                continue
            result = node.backward(g)
        else:
            gs = [grads[i] for i in outs]
            if all(g is None for g in gs):
                continue
            for i in outs:
                grads[i] = None
            gs = [np.zeros(*meta[:2]) if g is None else g for g, meta in zip(gs, node._output_meta)]
            result = node.backward(*gs)
        seen[(id(sched), n)] = type(result) is tuple
        if type(result) is not tuple:
            result = (result,)
        for j, (i, dest, to_exit, shape, dtype) in enumerate(deliveries):
            g = result[i]
            fits = g is None or g.shape != shape or g.dtype != dtype
            seen[(id(sched), n, j)] = (g is None, fits, type(g) is _ndarray)
            if g is None:
                continue
            if fits:
                g = fit_to_input(g, shape, dtype, False)
            buf = exits if to_exit else grads
            old = buf[dest]
            buf[dest] = g if old is None else old + g
    return exits


def run_backward_step(step: BackwardStep, env: list, tensors: list, nodes: list, seen: dict) -> None:
    """``loss.backward()`` inside the region: the schedule, then each leaf's ``.grad``."""
    root = env[step.root]
    if step.gradient is None:
        seed = np.empty(root.shape, root.dtype) if type(root) is _ndarray else root.copy()
        seed.fill(1)
    else:
        seed = env[step.gradient]
        if seed.dtype != root.dtype:
            seed = seed.astype(root.dtype)
    exits = run_schedule(step.schedule, nodes, (seed,), seen)
    del seed
    specs = step.schedule.exits
    for i in range(len(specs)):
        g = exits[i]
        exits[i] = None
        if g is not None:
            accumulate(tensors[specs[i][0]], g, False)  # takes g over without a copy when nothing else holds it
        del g
    for slot, leaf in step.grads_out:
        t = tensors[leaf]._grad
        tensors[slot] = t
        env[slot] = None if t is None else t._data


def run_call(step: CallStep) -> None:
    if step.kind == "update":
        method, index = step.args
        opt = step.target
        with grad_mode.no_grad():
            group = opt.param_groups[index]
            params = [p for p in group["params"] if p._grad is not None]
            if params:
                method(opt, group, params)
    elif step.kind == "count":
        with grad_mode.no_grad():
            step.target.add_(1)
    elif step.kind == "zero_grad":
        method, args, kwargs = step.args
        method(step.target, *args, **kwargs)


def run_whole(step: CallStep, env: list, tensors: list) -> None:
    """A function marked ``replayed_whole`` called again, its tensor arguments found as this replay has them."""
    fn, args, kwargs = step.args
    out = fn(*whole_value(args, tensors, env), **whole_value(kwargs, tensors, env))
    if step.out is not None:
        tensors[step.out], env[step.out] = out, out._data


def replay(plan, arg_tensors: list, recompute=None):
    """Run ``plan`` for a call whose tensor arguments are ``arg_tensors``; return the region's result."""
    if plan.code is not None:
        return plan.code.run(arg_tensors, recompute)
    env = [None] * plan.n_slots
    tensors = [None] * plan.n_slots
    for s, t in zip(plan.args, arg_tensors):
        env[s] = t._data
        tensors[s] = t
    for s, t in plan.externals:
        env[s] = t._data
        tensors[s] = t
    for s, *place in plan.located:
        t = tensors[s] = locate(*place)
        env[s] = t._data
    nodes = [None] * len(plan.steps)
    for step in plan.steps:
        kind = type(step)
        if kind is OpStep:
            run_op(step, env, nodes, tensors, plan.seen)
        elif kind is BackwardStep:
            run_backward_step(step, env, tensors, nodes, plan.seen)
        elif kind is FuncStep:
            run_func(step, env)
        elif step.kind == "set_grad":
            tensors[step.target].grad = None
        else:
            if step.kind == "whole":
                run_whole(step, env, tensors)
            else:
                run_call(step)
            for s, t in plan.externals:
                env[s] = t._data
            for s, *_ in plan.located:
                env[s] = tensors[s]._data
    node = None
    if plan.boundary is not None:
        node = boundary_node(plan, env, tensors, nodes, recompute)
    elif plan.outputs:
        node = spent_node(plan, env)
    return deliver(plan, rebuild(plan.result, env, tensors, node))


def deliver(plan, value):
    """The region's return value; first, where the region keeps state for its next call (``plan.stores``), the
    values it stored there, as its own code did."""
    if not plan.stores:
        return value
    for (container, key), stored in zip(plan.stores, value[1:]):
        put(container, key, stored)
    return value[0]


def rebuild(shape, env: list, tensors: list, node, made: dict | None = None):
    """The region's return value from its description (``plan._spec``): new tensors around the replay's arrays
    (one per slot, so that a tensor returned and also stored is one object, as in eager mode), the call's own
    tensors, containers and plain values.

    >>> rebuild((list, (("v", 1), ("in", 0))), [], ["x"], None)
    [1, 'x']
    """
    kind = shape[0]
    if kind == "out":
        made = {} if made is None else made
        _, slot, nr = shape
        t = made.get(slot)
        if t is None:
            t = made[slot] = Tensor._make(env[slot]) if nr < 0 else Tensor._make(env[slot], True, node, nr)
        return t
    if kind == "in":
        return tensors[shape[1]]
    if kind == "v":
        return shape[1]
    made = {} if made is None else made
    if kind is dict:
        return {k: rebuild(v, env, tensors, node, made) for k, v in shape[1]}
    items = [rebuild(v, env, tensors, node, made) for v in shape[1]]
    return items if kind is list else kind(items)


class CompiledFunctionBackward(Node):
    """The node of a compiled forward's outputs: its backward replays the plan's backward schedule and hands the
    gradients of the region's inputs and parameters to the engine (see the module's docstring)."""

    def backward(self, *grads):
        plan, nodes, versions, recompute = self.extra
        for counter, version, shape in versions:
            if counter[0] != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [tensor of shape {shape}], read by a compiled region, is at version {counter[0]}; "
                    f"expected version {version} instead. Hint: change a clone() instead, or make the change out "
                    "of place."
                )
        if grad_mode.state.create_graph:
            return recompute_grads(self, recompute, grads)
        if plan.code is not None:
            return plan.code.back(nodes, grads)
        return tuple(run_schedule(plan.boundary, list(nodes), grads, plan.seen))


def boundary_node(plan, env: list, tensors: list, nodes: list, recompute) -> CompiledFunctionBackward:
    node = CompiledFunctionBackward()
    edges, meta = [], []
    for slot, shape, dtype in plan.boundary.exits:
        t = tensors[slot]
        if t._grad_fn is not None:
            edges.append((t._grad_fn, t._output_nr))
        else:
            edges.append((accumulator(t), 0))
        meta.append((shape, dtype))
    node.next_functions = tuple(edges)
    node._input_meta = tuple(meta)
    node.num_outputs = len(plan.outputs)
    node._output_meta = tuple((env[s].shape, env[s].dtype, np) for s, _ in plan.outputs)
    versions = tuple(
        (tensors[s]._version_counter, tensors[s]._version_counter[0], tuple(env[s].shape)) for s in plan.saved_inputs
    )
    exit_tensors = tuple(tensors[slot] for slot, _, _ in plan.boundary.exits)
    node.extra = (plan, nodes, versions, (recompute, exit_tensors))
    return node


def spent_node(plan, env: list) -> CompiledFunctionBackward:
    """The node of outputs whose backward already ran inside the region: a second backward raises PyTorch's
    'backward through the graph a second time' error, as eager mode would."""
    node = CompiledFunctionBackward()
    node.num_outputs = len(plan.outputs)
    node._freed = True
    return node


def recompute_grads(node, recompute, grads) -> tuple:
    """``create_graph=True`` through a compiled forward: run the region eagerly again on the same inputs and let
    the engine differentiate that graph, so that higher-order gradients hold."""
    (run, exit_tensors) = recompute
    with grad_mode.enable_grad():
        outs = run()
    outs = [t for t in tensors_in(outs) if t.requires_grad]
    found = autograd_grad(outs, list(exit_tensors), grad_outputs=list(grads), create_graph=True, allow_unused=True)
    return tuple(found)
