"""Look at a backward graph: a text tree of its nodes and the memory they hold, or a Graphviz drawing.

``graph(loss)`` walks ``grad_fn`` and ``next_functions`` from the given tensors (iteratively, so a graph of any
depth works) and returns a :class:`Graph`. Printing it shows each node once, named as ``grad_fn`` shows it; a node
reached again (a tensor used twice) is shown as a reference to its first appearance. Leaves appear as
``AccumulateGrad`` nodes with the leaf's shape and dtype, a node's single input follows on the next line (a
branch only where a node has several inputs), and each node lists the tensors it saved for backward
with their size in bytes, or ``freed`` once backward has run and released them.

>>> import trainkit
>>> a = trainkit.ones(2, requires_grad=True)
>>> y = (a * a).sum()
>>> print(graph(y))
#0 SumBackward0
#1 MulBackward0  saved: (2,) float32 8 B, (2,) float32 8 B
#2 AccumulateGrad  leaf (2,) float32 requires_grad=True
total saved: 8 B in 1 distinct array
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

from .engine import AccumulateGrad, Node, accumulator
from .tensor import Tensor

__all__ = ["Graph", "graph", "tensors_in"]

_RENDER_FORMATS = ("svg", "png", "pdf")


def _shape_of(value) -> tuple:
    return tuple(int(n) for n in np.shape(value))


def _dtype_name(value) -> str:
    dt = getattr(value, "dtype", None)
    return type(value).__name__ if dt is None else str(dt)


def _is_array(value) -> bool:
    return hasattr(value, "nbytes") and hasattr(value, "shape")


def _nbytes(value) -> int:
    n = getattr(value, "nbytes", None)
    return int(n) if n is not None else 0


def _format_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def input_nodes(node) -> list:
    """The distinct input nodes of ``node`` in ``next_functions`` order (inputs without a node are left out)."""
    out = []
    seen = set()
    for child, _ in getattr(node, "next_functions", ()):
        if child is not None and id(child) not in seen:
            seen.add(id(child))
            out.append(child)
    return out


class Graph:
    """The backward graph reachable from some tensors; see :func:`graph`.

    ``roots`` are the starting nodes, ``nodes`` every node in the order the walk first meets it. The text and DOT
    views are built when asked for, so they show the graph as it is then (saved tensors ``freed`` after backward).
    """

    def __init__(self, roots: list, names: dict | None = None):
        self.roots = list(dict.fromkeys(roots))
        self.names = dict(names or {})  # id(leaf tensor) -> its name (a model's parameter name)
        order: list = []
        index: dict = {}
        stack = list(reversed(self.roots))
        while stack:
            node = stack.pop()
            if id(node) in index:
                continue
            index[id(node)] = len(order)
            order.append(node)
            stack.extend(c for c in reversed(input_nodes(node)) if id(c) not in index)
        self.nodes = order
        self._index = index

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"<Graph: {len(self.nodes)} nodes, {_format_bytes(self.saved_bytes)} saved>"

    def __str__(self) -> str:
        return self.text()

    # ------------------------------------------------------------------------------------------------ saved values
    @staticmethod
    def saved(node) -> list | None:
        """``(shape, dtype, nbytes)`` per tensor ``node`` saved for backward; ``None`` once they were freed."""
        saved = getattr(node, "_saved", None)
        if saved is None:
            return None if getattr(node, "_freed", False) else []
        out = []
        for entry in saved:
            if entry is None or not _is_array(entry[1]):  # a Python number kept for backward is no tensor
                continue
            array = entry[1]
            out.append((_shape_of(array), _dtype_name(array), _nbytes(array)))
        return out

    @property
    def saved_bytes(self) -> int:
        """Bytes held by saved tensors across the graph, each distinct array counted once."""
        seen: dict = {}
        for node in self.nodes:
            saved = getattr(node, "_saved", None)
            for entry in saved or ():
                if entry is not None and _is_array(entry[1]):
                    seen[id(entry[1])] = _nbytes(entry[1])
        return sum(seen.values())

    def _saved_arrays(self) -> int:
        saved = (getattr(n, "_saved", None) or () for n in self.nodes)
        return len({id(e[1]) for entries in saved for e in entries if e is not None and _is_array(e[1])})

    # ------------------------------------------------------------------------------------------------------ labels
    def _leaf_text(self, node) -> str:
        var = node.variable
        name = self.names.get(id(var), "leaf")
        return f"{name} {tuple(var.shape)} {_dtype_name(var._data)} requires_grad={var.requires_grad}"

    def _label(self, node) -> str:
        name = node.name() if isinstance(node, Node) else type(node).__name__
        text = f"#{self._index[id(node)]} {name}"
        if isinstance(node, AccumulateGrad):
            return f"{text}  {self._leaf_text(node)}"
        saved = self.saved(node)
        if saved is None:
            return f"{text}  saved: freed"
        if saved:
            parts = ", ".join(f"{shape} {dt} {_format_bytes(n)}" for shape, dt, n in saved)
            return f"{text}  saved: {parts}"
        return text

    def text(self) -> str:
        """The graph as an indented tree, one line per node; a node met again is shown as ``#n (see above)``.

        A node with one input has it on the next line at the same indentation; a node with several inputs
        branches, each input indented under it.

        >>> import trainkit
        >>> a = trainkit.ones(3, requires_grad=True)
        >>> y = a.exp() + a.exp()
        >>> print(graph(y).text())
        #0 AddBackward0
        ├── #1 ExpBackward0  saved: (3,) float32 12 B
        │   #2 AccumulateGrad  leaf (3,) float32 requires_grad=True
        └── #3 ExpBackward0  saved: (3,) float32 12 B
            #2 AccumulateGrad (see above)
        total saved: 24 B in 2 distinct arrays
        """
        lines: list[str] = []
        shown: set = set()
        # (node, prefix for its own line, prefix for its children's lines)
        stack = [(root, "", "") for root in reversed(self.roots)]
        while stack:
            node, head, body = stack.pop()
            if id(node) in shown:
                name = node.name() if isinstance(node, Node) else type(node).__name__
                lines.append(f"{head}#{self._index[id(node)]} {name} (see above)")
                continue
            shown.add(id(node))
            lines.append(head + self._label(node))
            children = input_nodes(node)
            if len(children) == 1:  # a chain goes straight down, so that a long one stays narrow
                stack.append((children[0], body, body))
                continue
            for i in range(len(children) - 1, -1, -1):
                last = i == len(children) - 1
                stack.append((children[i], body + ("└── " if last else "├── "), body + ("    " if last else "│   ")))
        n = self._saved_arrays()
        lines.append(f"total saved: {_format_bytes(self.saved_bytes)} in {n} distinct array{'' if n == 1 else 's'}")
        return "\n".join(lines)

    # --------------------------------------------------------------------------------------------------- graphviz
    def to_dot(self) -> str:
        """The graph in Graphviz's DOT language: one node per graph node, an edge from each node to its inputs.

        Leaves are boxes labelled with the leaf's shape and dtype; other nodes are ellipses listing saved tensors.

        >>> import trainkit
        >>> a = trainkit.ones(2, requires_grad=True)
        >>> print(graph(a.exp()).to_dot())
        digraph trainkit_graph {
          graph [rankdir=TB];
          node [fontname="monospace", fontsize=10];
          n0 [label="ExpBackward0\\nsaved: (2,) float32 8 B", shape=ellipse];
          n1 [label="AccumulateGrad\\n(2,) float32", shape=box, style=filled, fillcolor=lightblue];
          n0 -> n1;
        }
        """
        lines = ["digraph trainkit_graph {", "  graph [rankdir=TB];", '  node [fontname="monospace", fontsize=10];']
        for i, node in enumerate(self.nodes):
            name = node.name() if isinstance(node, Node) else type(node).__name__
            if isinstance(node, AccumulateGrad):
                var = node.variable
                label = f"{name}\n{tuple(var.shape)} {_dtype_name(var._data)}"
                lines.append(f'  n{i} [label="{_escape(label)}", shape=box, style=filled, fillcolor=lightblue];')
                continue
            saved = self.saved(node)
            if saved is None:
                label = f"{name}\nsaved: freed"
            elif saved:
                label = name + "".join(f"\nsaved: {shape} {dt} {_format_bytes(n)}" for shape, dt, n in saved)
            else:
                label = name
            lines.append(f'  n{i} [label="{_escape(label)}", shape=ellipse];')
        for i, node in enumerate(self.nodes):
            for child in input_nodes(node):
                lines.append(f"  n{i} -> n{self._index[id(child)]};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def render(self, path: str | Path, format: str | None = None) -> Path:
        """Write the DOT text next to ``path`` (``.dot``) and draw it with Graphviz's ``dot`` program.

        The drawing's format comes from ``format`` or from ``path``'s suffix (``svg``, ``png`` or ``pdf``; ``svg``
        otherwise). A ``path`` ending in ``.dot`` (with no ``format``) only writes the DOT file. Returns the path
        of the file written last. Raises ``RuntimeError`` when Graphviz is not installed, after writing the
        ``.dot`` file.

        >>> import tempfile, trainkit
        >>> a = trainkit.ones(2, requires_grad=True)
        >>> out = graph(a.exp()).render(Path(tempfile.mkdtemp()) / "g.dot")
        >>> out.read_text().startswith("digraph")
        True
        """
        path = Path(path)
        suffix = path.suffix.lower().lstrip(".")
        if format is None:
            format = suffix if suffix in _RENDER_FORMATS or suffix == "dot" else "svg"
        format = format.lower().lstrip(".")
        if format != "dot" and format not in _RENDER_FORMATS:
            raise ValueError(f"unsupported format {format!r}: use one of {', '.join(_RENDER_FORMATS)} or 'dot'")
        dot_path = path.with_suffix(".dot") if suffix in _RENDER_FORMATS or suffix == "dot" else Path(f"{path}.dot")
        dot_path.parent.mkdir(parents=True, exist_ok=True)
        dot_path.write_text(self.to_dot())
        if format == "dot":
            return dot_path
        out_path = path if suffix == format else dot_path.with_suffix("." + format)
        exe = shutil.which("dot")
        if exe is None:
            raise RuntimeError(
                f"Graphviz is not installed (no 'dot' program on PATH), so no .{format} was drawn; the .dot file "
                f"was written to {dot_path}. Install Graphviz, or render it elsewhere with "
                f"'dot -T{format} {dot_path} -o {out_path}'."
            )
        result = subprocess.run(
            [exe, f"-T{format}", str(dot_path), "-o", str(out_path)], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"Graphviz's dot failed ({result.returncode}): {result.stderr.strip()}")
        return out_path


def _escape(label: str) -> str:
    return label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def graph(tensor_or_tensors, params: dict | None = None) -> Graph:
    """The backward graph of a tensor (or of several: a list or tuple of tensors), as a :class:`Graph`.

    ``params`` (name -> tensor, e.g. ``dict(model.named_parameters())``) names the leaves it holds: the graph shows
    ``hidden.weight`` where it would show ``leaf``.

    A leaf that requires grad gives a graph of its ``AccumulateGrad`` node alone. A tensor that does not require
    grad has no graph: ``ValueError``.

    >>> import trainkit
    >>> w = trainkit.ones(2, 3, requires_grad=True)
    >>> x = trainkit.ones(4, 2)
    >>> g = graph((x @ w).relu().sum())
    >>> [node.name() for node in g.nodes]
    ['SumBackward0', 'ReluBackward0', 'MmBackward0', 'AccumulateGrad']
    >>> g.saved_bytes
    80
    >>> print(graph((x @ w).sum(), params={"w": w}).text().splitlines()[-2])
    #2 AccumulateGrad  w (2, 3) float32 requires_grad=True
    """
    return Graph(roots_of(tensor_or_tensors, "graph"), {id(t): name for name, t in (params or {}).items()})


def roots_of(tensor_or_tensors, caller: str) -> list:
    """The backward nodes a walk starts from: each tensor's ``grad_fn``, or the ``AccumulateGrad`` of a leaf that
    requires grad. ``caller`` names the function in the errors (a tensor without a graph, a non-tensor).

    >>> import trainkit
    >>> roots_of(trainkit.ones(2, requires_grad=True).exp(), "graph")[0].name()
    'ExpBackward0'
    """
    tensors = [tensor_or_tensors] if isinstance(tensor_or_tensors, Tensor) else list(tensor_or_tensors)
    if not tensors:
        raise ValueError(f"{caller}() needs at least one tensor: pass the loss (or a list of outputs)")
    roots = []
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{caller}() takes tensors, got {type(t).__name__} at position {i}")
        if t.grad_fn is not None:
            roots.append(t.grad_fn)
        elif t.requires_grad:
            roots.append(accumulator(t))
        else:
            raise ValueError(
                f"tensor at position {i} does not require grad, so it has no backward graph: compute it from "
                "tensors with requires_grad=True, outside no_grad()"
            )
    return roots


def tensors_in(value) -> list:
    """The tensors in a value, in order, looking into (nested) lists, tuples and dicts: a model's outputs, a
    call's arguments.

    >>> import trainkit
    >>> len(tensors_in((trainkit.ones(1), [2, {"a": trainkit.ones(1)}])))
    2
    """
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_in(v)]
    return []
