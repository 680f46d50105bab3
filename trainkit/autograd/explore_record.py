"""What the graph explorer records while a model runs: which module made each node, and the backward pass.

A :class:`Recorder` watches two things, both optional. Given a model, it puts a forward pre-hook and a forward hook
on each of its modules for as long as the ``with`` block lasts: every node takes a number from the engine's counter
when it is made, so the numbers drawn before and after a module's call bracket the nodes that call made, with or
without parameters (a ReLU's ``ReluBackward0``, a Flatten's ``ViewBackward0``), and a call inside another call
nests inside its numbers. And for every backward pass that starts in the block, it hooks the graph's nodes to note
the order they run in and the norm of each gradient (:mod:`trainkit.autograd.explore` draws both).

>>> import trainkit
>>> from trainkit import nn
>>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
>>> with Recorder(net) as rec:
...     out = net(trainkit.ones(4, 2)).sum()
>>> rec.module_of(out.grad_fn.next_functions[0][0])
'1'
"""

from __future__ import annotations

import math
import weakref
from bisect import bisect_right

from . import engine
from .backend import sum_to
from .engine import AccumulateGrad, next_seq
from .graph import Graph
from .saved import SAME_AS_OUTPUT
from .tensor import Tensor

__all__ = ["Recorder", "finite", "norm_of", "saved_entries"]


def norm_of(array) -> float:
    """The L2 norm of an array (NumPy or CuPy) as a Python float, in float64 so that tiny values do not vanish.

    >>> import numpy as np
    >>> norm_of(np.array([3.0, 4.0], dtype="float32"))
    5.0
    """
    value = float((abs(array.astype("float64")) ** 2).sum()) ** 0.5 if array.size else 0.0
    return value if math.isfinite(value) else float("inf") if value > 0 else float("nan")


def finite(x: float | None) -> float | str | None:
    """JSON has no inf or NaN: they travel as strings the page shows as they are.

    >>> finite(1.5), finite(float("inf"))
    (1.5, 'inf')
    """
    if x is None or math.isfinite(x):
        return x
    return str(x)


def saved_entries(node) -> list:
    """``(tensor or SavedOutput or label, shape, dtype, nbytes, version, counter, array id)`` per saved tensor of
    ``node``; an array the op keeps for itself is named by the op's ``saved_labels`` (saved position -> name).

    >>> import trainkit
    >>> x = trainkit.ones(2, requires_grad=True)
    >>> [e[1:4] for e in saved_entries((x * x).grad_fn)]
    [((2,), 'float32', 8), ((2,), 'float32', 8)]
    """
    out = []
    labels = getattr(node, "saved_labels", None) or {}
    for k, entry in enumerate(getattr(node, "_saved", None) or ()):
        if entry is None or not hasattr(entry[1], "nbytes"):
            continue  # a value no wanted gradient needs, or a Python number kept for backward
        tensor, array, version, counter = entry
        if k in labels and tensor is array:
            tensor = labels[k]
        out.append(
            (
                tensor,
                tuple(int(s) for s in array.shape),
                str(array.dtype),
                int(array.nbytes),
                version,
                counter,
                id(array),
            )
        )
    return out


def _check_model(model) -> None:
    needed = ("named_modules", "register_forward_pre_hook", "register_forward_hook")
    if model is not None and not all(hasattr(model, n) for n in needed):
        raise TypeError(
            f"record(model): model must be a Module (something with named_modules() and forward hooks), got "
            f"{type(model).__name__}; call record() without it to record the backward pass alone"
        )


class Recorder:
    """What :func:`record` captured: which module made each node, and per backward pass the order nodes ran in and
    the gradients that reached them.

    Module calls: with a ``model``, each of its modules gets a forward pre-hook and a forward hook while the block
    runs (and none after it, even when the forward raised). Each call is kept as ``(name, first, end)``, the
    engine's node counter before and after it; a node belongs to the innermost call whose numbers hold its own.

    Backward passes: the recorder watches through the engine's own hooks: when a pass starts it puts a pre-hook
    (which sees a node's incoming gradient, summed) and a post-hook (which sees what it sends to each input) on
    every node, and takes them off again when the next pass starts or the recording ends. It also notes each
    node's saved tensors before the pass frees them.

    The block may be entered more than once (the forward in one, the backward later in another): what each
    recorded adds up.
    """

    def __init__(self, model=None):
        _check_model(model)
        self.model = model
        self.passes: list = []  # per pass: {"steps": [...], "edges": {(node id, input): norm}, "saved": {...}}
        self.calls: list = []  # (module name, counter before, counter after) per finished module call
        self.module_types: dict = {}  # module name -> class name, for every module of the model
        self._open: list = []  # (module, name, counter before) of the calls under way, outermost first
        self._handles: list = []
        self._module_handles: list = []
        self._created: list = []  # nodes given a hook table by us, to take it back
        self._bounds: tuple | None = None  # the calls as sorted boundaries, made once when first asked

    # ------------------------------------------------------------------------------------------ module calls
    def _enter_call(self, module, name: str) -> None:
        self._open.append((module, name, next_seq()))

    def _leave_call(self, module, name: str) -> None:
        # a call that raised inside this one (and was caught) never got its forward hook: it is dropped here
        while self._open:
            opened, opened_name, first = self._open.pop()
            if opened is module and opened_name == name:
                self.calls.append((name, first, next_seq()))
                self._bounds = None
                return

    def _hook_modules(self) -> None:
        if self.model is None:
            return
        for name, module in self.model.named_modules():
            self.module_types.setdefault(name, type(module).__name__)
            self._module_handles.append(
                module.register_forward_pre_hook(lambda m, args, name=name: self._enter_call(m, name))
            )
            self._module_handles.append(
                module.register_forward_hook(lambda m, args, out, name=name: self._leave_call(m, name))
            )

    def _unhook_modules(self) -> None:
        for handle in self._module_handles:
            handle.remove()
        self._module_handles, self._open = [], []

    def module_of(self, node) -> str | None:
        """The qualified name of the innermost module whose recorded call made ``node`` (``""``: the model's own
        forward, outside its children); None for a node made outside every recorded call (the loss, a leaf's
        ``AccumulateGrad``)."""
        if self._bounds is None:
            # calls nest (one ends before its caller does), so between two consecutive boundaries the innermost
            # open call is fixed: the boundaries sorted, each with the name of that call
            events = sorted([(first, 1, n) for n, first, _ in self.calls] + [(end, -1, n) for n, _, end in self.calls])
            stack: list = []
            keys, names = [], []
            for seq, kind, name in events:
                if kind == 1:
                    stack.append(name)
                elif stack:
                    stack.pop()
                keys.append(seq)
                names.append(stack[-1] if stack else None)
            self._bounds = (keys, names)
        keys, names = self._bounds
        k = bisect_right(keys, node._seq) - 1
        return names[k] if k >= 0 else None

    # ------------------------------------------------------------------------------------------ backward passes
    def _observe(self, roots) -> None:
        self._detach_hooks()
        g = Graph(list(roots))
        current = {"steps": [], "edges": {}, "arrived": {}, "saved": {}, "nodes": g.nodes, "roots": list(roots)}
        self.passes.append(current)
        for node in g.nodes:
            current["saved"][id(node)] = [
                (weakref.ref(e[0]) if isinstance(e[0], Tensor) else e[0],) + e[1:] for e in saved_entries(node)
            ]
            if node._hooks is None:
                self._created.append(node)
            self._handles.append(node.register_prehook(lambda grads, n=node: self._before(current, n, grads)))
            if not isinstance(node, AccumulateGrad):
                self._handles.append(node.register_hook(lambda gi, go, n=node: self._after(current, n, gi)))

    def _before(self, current: dict, node, grads) -> None:
        arrived = current["arrived"].pop(id(node), [])
        norms = [None if g is None else norm_of(g._data) for g in grads]
        if not arrived:  # a root: its gradient was seeded by backward()
            arrived = [(None, -1, nr, n) for nr, n in enumerate(norms) if n is not None]
        current["steps"].append((node, arrived, norms))

    def _after(self, current: dict, node, grad_inputs) -> None:
        for k, ((child, nr), g) in enumerate(zip(node.next_functions, grad_inputs)):
            if child is None or g is None:
                continue
            data = g._data
            meta = node._input_meta[k] if k < len(node._input_meta) else SAME_AS_OUTPUT
            if meta is not SAME_AS_OUTPUT and tuple(data.shape) != tuple(meta[0]):
                data = sum_to(data, tuple(meta[0]))  # the norm of what reaches the input, as the engine sums it
            norm = norm_of(data)
            current["edges"][(id(node), k)] = norm
            current["arrived"].setdefault(id(child), []).append((node, k, nr, norm))

    def _detach_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        for node in self._created:
            hooks = node._hooks
            shared = isinstance(node, AccumulateGrad) and node.variable._hooks is hooks
            if hooks is not None and not shared and not (hooks.tensor or hooks.retain or hooks.pre or hooks.post):
                node._hooks = None  # as it was: a node without hooks costs the engine nothing
        self._handles, self._created = [], []

    def _pass_for(self, index: dict):
        for current in reversed(self.passes):
            if any(id(r) in index for r in current["roots"]):
                return current
        return None

    def saved_snapshot(self) -> dict:
        """Saved-tensor entries by node id, as they were when the latest pass began (before backward freed them)."""
        merged: dict = {}
        for current in self.passes:
            merged.update(current["saved"])
        return merged

    def steps_for(self, nodes: list, index: dict, edges: list) -> list:
        """The steps of the pass over ``nodes`` (numbered by ``index``), in ``collect``'s terms; fills the edges'
        gradient norms."""
        current = self._pass_for(index)
        if current is None:
            return []
        for edge in edges:
            edge["norm"] = finite(current["edges"].get((id(nodes[edge["from"]]), edge["input"])))
        steps = []
        for node, arrived, norms in current["steps"]:
            if id(node) not in index:
                continue
            steps.append(
                {
                    "step": len(steps),
                    "node": index[id(node)],
                    "incoming": [
                        {"from": None if src is None else index.get(id(src)), "output_nr": nr, "norm": finite(norm)}
                        for src, _, nr, norm in arrived
                    ],
                    "summed": len(arrived) > 1,
                    "norms": [finite(n) for n in norms],
                }
            )
        return steps

    def __enter__(self) -> Recorder:
        self._hook_modules()
        engine.observers.append(self._observe)
        return self

    def __exit__(self, *exc) -> None:
        self._unhook_modules()
        if self._observe in engine.observers:
            engine.observers.remove(self._observe)
        self._detach_hooks()
