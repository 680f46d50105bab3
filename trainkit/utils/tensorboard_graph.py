"""A model's autograd graph as the ``GraphDef`` TensorBoard's Graphs tab draws (``SummaryWriter.add_graph``).

PyTorch traces the model with TorchScript; trainkit has no tracer and needs none: one forward call builds the backward
graph, and that graph read in the forward direction (a node's ``next_functions`` are its inputs) is the model's
data flow. Forward hooks on every sub-module record where each call started and ended, so every node lands in the
scope of the innermost module that made it (``Sequential/Linear[0]/AddmmBackward0``) and TensorBoard folds each
module into one box. Parameters keep their names (``Sequential/Linear[0]/weight``); the model's inputs appear as
``input/input_0`` and its outputs as ``output/output_0``, as PyTorch shows them.
"""

from __future__ import annotations

from typing import Any

from ..autograd import grad_mode
from ..autograd.engine import AccumulateGrad, accumulator
from ..autograd.graph import Graph, input_nodes, tensors_in
from ..autograd.tensor import Tensor


def _node_of(t: Tensor):
    return t.grad_fn if t.grad_fn is not None else (accumulator(t) if t.requires_grad else None)


def _scope_path(model, qualified: str, modules: dict) -> str:
    """``encoder.0`` -> ``Net/Sequential[encoder]/Linear[0]``: each level's class with its attribute name."""
    parts = [type(model).__name__]
    if qualified:
        prefix = ""
        for name in qualified.split("."):
            prefix = f"{prefix}.{name}" if prefix else name
            parts.append(f"{type(modules[prefix]).__name__}[{name}]")
    return "/".join(parts)


def _run_with_scopes(model, inputs: tuple) -> tuple[Any, list[tuple[str, set, list]]]:
    """The model's output, and each module call as (qualified name, ids of its input nodes, its output nodes) in
    the order the calls ended: inner modules first."""
    calls: list[tuple[str, set, list]] = []
    handles = []
    for name, module in model.named_modules():

        def hook(module, args, output, name=name):
            boundary = {id(n) for n in map(_node_of, tensors_in(args)) if n is not None}
            calls.append((name, boundary, [n for n in map(_node_of, tensors_in(output)) if n is not None]))

        handles.append(module.register_forward_hook(hook))
    try:
        with grad_mode.enable_grad():
            output = model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return output, calls


def build_graph_def(model, input_to_model: Any = None):
    """The ``GraphDef`` protocol buffer of ``model`` called on ``input_to_model`` (a tensor or a tuple of them).

    >>> import trainkit
    >>> from trainkit import nn
    >>> g = build_graph_def(nn.Sequential(nn.Linear(2, 3), nn.ReLU()), trainkit.ones(4, 2))  # doctest: +SKIP
    >>> [n.name for n in g.node][-2:]                                                        # doctest: +SKIP
    ['Sequential/Linear[0]/AddmmBackward0', 'Sequential/Linear[0]/bias']
    """
    from tensorboardX.proto import attr_value_pb2, graph_pb2, node_def_pb2, versions_pb2

    raw = (
        input_to_model
        if isinstance(input_to_model, (tuple, list))
        else (() if input_to_model is None else (input_to_model,))
    )
    # a copy of each floating input that requires grad puts the inputs into the graph as leaves we can name
    inputs = tuple(
        t.detach().requires_grad_(True) if isinstance(t, Tensor) and t.is_floating_point() else t for t in raw
    )
    output, calls = _run_with_scopes(model, inputs)
    outputs = [t for t in tensors_in(output) if _node_of(t) is not None]
    if not outputs:
        raise ValueError(
            f"add_graph: the output of {type(model).__name__} does not require grad, so there is no "
            "graph to draw; call it outside no_grad(), with parameters or inputs that require grad"
        )
    graph = Graph([_node_of(t) for t in outputs])

    scope: dict[int, str] = {}
    for name, boundary, ends in calls:
        seen: set[int] = set()
        stack = list(ends)
        while stack:
            node = stack.pop()
            if id(node) in boundary or id(node) in seen:
                continue
            seen.add(id(node))
            scope.setdefault(id(node), name)
            stack.extend(input_nodes(node))

    modules = dict(model.named_modules())
    params = {id(p): name for name, p in model.named_parameters()}
    input_ids = {id(t): i for i, t in enumerate(inputs) if isinstance(t, Tensor)}
    names: dict[int, str] = {}
    taken: dict[str, int] = {}
    for node in graph.nodes:
        if isinstance(node, AccumulateGrad) and id(node.variable) in params:
            owner, _, attr = params[id(node.variable)].rpartition(".")
            name = f"{_scope_path(model, owner, modules)}/{attr}"
        elif isinstance(node, AccumulateGrad) and id(node.variable) in input_ids:
            name = f"input/input_{input_ids[id(node.variable)]}"
        else:
            base = f"{_scope_path(model, scope.get(id(node), ''), modules)}/{node.name()}"
            taken[base] = taken.get(base, -1) + 1
            name = base if taken[base] == 0 else f"{base}_{taken[base]}"
        names[id(node)] = name

    def node_def(name: str, op: str, inputs: list[str], **attrs: str):
        return node_def_pb2.NodeDef(
            name=name, op=op, input=inputs, attr={k: attr_value_pb2.AttrValue(s=v.encode()) for k, v in attrs.items()}
        )

    nodes = []
    for node in reversed(graph.nodes):  # inputs before the nodes that use them
        if isinstance(node, AccumulateGrad):
            v = node.variable
            kind = "IO Node" if id(v) in input_ids else "Parameter"
            nodes.append(node_def(names[id(node)], kind, [], shape=str(tuple(v.shape)), dtype=str(v.dtype)))
        else:
            nodes.append(node_def(names[id(node)], node.name(), [names[id(c)] for c in input_nodes(node)]))
    for i, t in enumerate(outputs):
        nodes.append(
            node_def(
                f"output/output_{i}", "IO Node", [names[id(_node_of(t))]], shape=str(tuple(t.shape)), dtype=str(t.dtype)
            )
        )
    return graph_pb2.GraphDef(node=nodes, versions=versions_pb2.VersionDef(producer=22))
