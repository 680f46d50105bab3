"""An interactive page of a backward graph: ``explore(loss, params)`` writes one self-contained HTML file.

The page shows what autograd keeps: each node named as ``grad_fn`` shows it, its ``next_functions``, the tensors it
saved (shape, dtype, bytes, and the ``_version`` they were saved at against the version now: a stale one is what
makes backward fail), hooks and ``retain_grad`` marks, and for each tensor it can reach whether it is a leaf,
requires grad, has a ``.grad``, and shares storage with a view or a ``detach()``. Parameters are named as the model
names them (``hidden.weight``); every module is a box around the nodes its forward made, nested as the modules
are, and totals give saved memory by module and what ``retain_grad`` costs against a hook.

Everything is collected here as plain JSON-able data (:func:`collect`), embedded in the page, and drawn by the
page's own script (no network, no libraries). A recorder (:func:`record`, ``explore_record.py``) watches the model's
forward, so that each node lands in the module whose call made it (a ReLU or a Dropout as much as a Linear), and
captures a backward pass as it runs, so that the page can also show gradient norms on the edges and step through
the engine's order, even after the ordinary backward has freed the saved tensors. Without a recorded forward a node
belongs to the module of the parameters it reaches directly, and parameter-free modules have no box.

>>> import trainkit
>>> w = trainkit.ones(3, requires_grad=True)
>>> loss = (w * 2).sum()
>>> data = collect(loss, {"w": w})
>>> [n["name"] for n in data["nodes"]]
['SumBackward0', 'MulBackward0', 'AccumulateGrad']
>>> data["nodes"][2]["label"]
'w'
"""

from __future__ import annotations

import json
import weakref
from html import escape
from importlib import resources
from pathlib import Path

from .engine import AccumulateGrad, Node
from .explore_record import Recorder, finite, norm_of, saved_entries
from .graph import Graph, roots_of
from .saved import SavedOutput
from .tensor import Tensor

__all__ = ["Recorder", "collect", "explore", "record"]

VANISHING = 1e-7  # gradient norms below this are drawn as vanishing
EXPLODING = 1e3  # and above this as exploding
_PLACEHOLDER = "/*GRAPH_DATA*/"
_norm = norm_of  # its name here before the recorder moved to explore_record.py


def _name(node) -> str:
    return node.name() if isinstance(node, Node) else type(node).__name__


def _params(params) -> dict:
    """``params`` as a name -> tensor dict: a dict as given, or a module's ``named_parameters()``."""
    if params is None:
        return {}
    if hasattr(params, "named_parameters"):
        return dict(params.named_parameters())
    if isinstance(params, dict):
        return dict(params)
    raise TypeError(
        f"params must be a dict of name -> tensor or a Module, got {type(params).__name__}; pass "
        "dict(model.named_parameters()) or the model itself"
    )


class _Tensors:
    """The tensors the page describes (leaves, saved, retained), numbered once each, with storage sharing found
    among them: tensors with one version counter share storage (a view, or a ``detach()`` result)."""

    def __init__(self, names: dict):
        self.names = {id(t): n for n, t in names.items()}
        self.items: list = []
        self.index: dict = {}

    def add(self, t: Tensor) -> int:
        if id(t) not in self.index:
            self.index[id(t)] = len(self.items)
            self.items.append(t)
        return self.index[id(t)]

    def describe(self) -> list:
        by_counter: dict = {}
        for i, t in enumerate(self.items):
            by_counter.setdefault(id(t._version_counter), []).append(i)
        out = []
        for i, t in enumerate(self.items):
            grad = t._grad
            sharing = [j for j in by_counter[id(t._version_counter)] if j != i]
            if t._view is not None:
                storage = "a view: shares storage (and _version) with its base"
            elif sharing:
                storage = "shares storage (and _version) with another tensor here: a detach() result or a view"
            elif getattr(t._data, "base", None) is not None:
                storage = "its array is a view of another array"
            else:
                storage = "owns its storage"
            out.append(
                {
                    "id": i,
                    "name": self.names.get(id(t)),
                    "shape": list(t._data.shape),
                    "dtype": str(t._data.dtype),
                    "bytes": int(t._data.nbytes),
                    "is_leaf": t._grad_fn is None,
                    "requires_grad": t._requires_grad,
                    "grad": grad is not None,
                    "grad_bytes": int(grad._data.nbytes) if grad is not None else 0,
                    "grad_norm": finite(norm_of(grad._data)) if grad is not None else None,
                    "version": t._version_counter[0],
                    "storage": storage,
                    "shares_with": sharing,
                    "retains_grad": t.retains_grad,
                }
            )
        return out


def _inputs_first(nodes: list, index: dict) -> list:
    """Node numbers, each after all of its inputs. The graph's walk order is not enough where an input has several
    users (a weight shared by two calls of one module): it can list such an input before some of them."""
    users = [0] * len(nodes)
    for node in nodes:
        for child, _ in getattr(node, "next_functions", ()):
            if child is not None:
                users[index[id(child)]] += 1
    order = [i for i in range(len(nodes)) if users[i] == 0]
    for i in order:  # grows as it goes: a node joins once its last user is in
        for child, _ in getattr(nodes[i], "next_functions", ()):
            if child is not None:
                k = index[id(child)]
                users[k] -= 1
                if users[k] == 0:
                    order.append(k)
    return order[::-1]


def _modules(nodes: list, index: dict, leaf_module: dict, saved_modules: dict, trace: Recorder | None) -> list:
    """Each node's module. A leaf's is its name's prefix. An op made inside a module call that ``trace`` recorded
    belongs to the innermost such module (none for the model's own forward, outside its children), as TensorBoard
    scopes it. Any other op (the loss, or a graph whose forward was not recorded) belongs to the one module of the
    parameter-only inputs it has (``hidden.weight`` through a ``TBackward0``) and of the named tensors it saved;
    ops that mix modules, or touch none, belong to none."""
    module: list = [None] * len(nodes)
    param_side = [False] * len(nodes)
    for i in _inputs_first(nodes, index):
        node = nodes[i]
        if isinstance(node, AccumulateGrad):
            module[i] = leaf_module.get(id(node.variable))
            param_side[i] = module[i] is not None
            continue
        kids = [index[id(c)] for c, _ in node.next_functions if c is not None]
        found = {module[k] for k in kids if param_side[k]} | saved_modules.get(i, set())
        found.discard(None)
        if len(found) == 1:
            module[i] = found.pop()
            # a value made of parameters alone (a weight's transpose) belongs to their module, also for its users
            # (not a lookup by data, such as an embedding's rows: that is an activation)
            param_side[i] = (
                bool(kids)
                and len(kids) == len(node.next_functions)
                and all(param_side[k] for k in kids)
                and not getattr(node, "selects_by_data", False)
            )
    if trace is not None and trace.calls:
        for i, node in enumerate(nodes):
            made_in = None if isinstance(node, AccumulateGrad) else trace.module_of(node)
            if made_in is not None:
                module[i] = made_in or None
    return module


def _boxes(module: list, trace: Recorder | None) -> list | None:
    """The module boxes of a recorded forward: each module that owns a node, and each module around one (a
    Sequential around its layers), with its class and the box it sits in (``""``: the page). None without a
    recorded forward: the page then draws the modules the nodes name."""
    if trace is None or not trace.calls:
        return None
    kinds = trace.module_types
    names: set = set()
    for m in filter(None, set(module)):
        parts = m.split(".")
        names.add(m)
        names.update(p for p in (".".join(parts[:k]) for k in range(1, len(parts))) if p in kinds)
    out = []
    for name in sorted(names):
        parts = name.split(".")
        around = (".".join(parts[:k]) for k in range(len(parts) - 1, 0, -1))
        out.append({"name": name, "type": kinds.get(name), "parent": next((p for p in around if p in names), "")})
    return out


def _idle(boxes: list | None, trace: Recorder | None) -> list:
    """The modules whose recorded calls made no node of this graph (an Identity, a Dropout in eval mode, a
    module under ``no_grad``): they have no box, and the page lists them instead."""
    if boxes is None:
        return []
    drawn = {b["name"] for b in boxes}
    called = dict.fromkeys(name for name, _, _ in trace.calls if name and name not in drawn)
    why = (
        "its forward ran, but no node here came from it: it passed its input through (an Identity, a Dropout in "
        "eval mode), ran without grad, or what it made does not reach this output"
    )
    return [{"name": n, "type": trace.module_types.get(n), "why": why} for n in called]


def collect(output, params=None, trace: Recorder | None = None, title: str | None = None) -> dict:
    """The graph behind ``output`` as plain JSON-able data: what the page draws.

    ``params``: a name -> tensor dict (``dict(model.named_parameters())``, or any tensors you want named) or a
    Module. ``trace``: a :class:`Recorder` that watched the backward pass, for gradient norms and the engine's order.

    >>> import trainkit
    >>> x = trainkit.ones(2, requires_grad=True)
    >>> y = x.exp()
    >>> y.retain_grad()
    >>> d = collect(y.sum())
    >>> d["totals"]["retain_grad_count"], len(d["edges"])
    (1, 2)
    """
    names = _params(params)
    roots = roots_of(output, "explore")
    g = Graph(roots)
    nodes = g.nodes
    index = {id(n): i for i, n in enumerate(nodes)}
    tensors = _Tensors(names)
    leaf_module = {id(t): n.rpartition(".")[0] for n, t in names.items() if "." in n}
    snapshot = trace.saved_snapshot() if trace is not None else {}
    saved_info: dict = {}
    saved_modules: dict = {}
    for i, node in enumerate(nodes):
        entries = saved_entries(node)
        freed = bool(getattr(node, "_freed", False))
        if freed and id(node) in snapshot:
            # the recorder holds saved tensors weakly (it must not keep activations alive): the dead ones are gone
            entries = [(e[0]() if isinstance(e[0], weakref.ref) else e[0],) + e[1:] for e in snapshot[id(node)]]
        saved_info[i] = (entries, freed)
        mods = {leaf_module[id(e[0])] for e in entries if isinstance(e[0], Tensor) and id(e[0]) in leaf_module}
        if mods:
            saved_modules[i] = mods
    module = _modules(nodes, index, leaf_module, saved_modules, trace)
    out_nodes, edges = [], []
    stale_count = 0
    for i, node in enumerate(nodes):
        entries, freed = saved_info[i]
        saved = []
        arrays: dict = {}
        for tensor, shape, dtype, nbytes, version, counter, array_id in entries:
            now = counter[0]
            item = {
                "shape": list(shape),
                "dtype": dtype,
                "bytes": nbytes,
                "saved_version": version,
                "version": now,
                "stale": now != version,
                "freed": freed,
            }
            if array_id in arrays:  # h * h saves h twice: one array, held once
                item["same_as"] = arrays[array_id]
            arrays.setdefault(array_id, len(saved))
            if type(tensor) is SavedOutput:
                item["what"] = f"output {tensor.nr} of this node"
            elif isinstance(tensor, Tensor):
                item["tensor"] = tensors.add(tensor)
                item["what"] = tensors.names.get(id(tensor)) or (
                    "input leaf" if tensor._grad_fn is None else f"output of {_name(tensor._grad_fn)}"
                )
            elif tensor is None:
                item["what"] = "an input, since freed"
            elif isinstance(tensor, str):
                item["what"] = f"{tensor}, kept by this node"
            else:
                item["what"] = "a constant array"
            if len(counter) > 1:  # the line that changed it, noted under detect_anomaly
                item["changed_at"] = "{}:{} ({}())".format(*counter[1][:3])
            stale_count += item["stale"]
            saved.append(item)
        hooks = node._hooks
        marks = {"tensor_hooks": 0, "pre_hooks": 0, "post_hooks": 0, "retain_grad": []}
        if hooks is not None:
            marks["tensor_hooks"] = sum(len(h) for h in hooks.tensor.values())
            marks["pre_hooks"], marks["post_hooks"] = len(hooks.pre), len(hooks.post)
            for nr, ref in hooks.retain.items():
                t = ref()
                if t is not None:
                    marks["retain_grad"].append({"output_nr": nr, "tensor": tensors.add(t)})
        item = {
            "id": i,
            "name": _name(node),
            "module": module[i],
            "saved": saved,
            "freed": freed,
            "hooks": marks,
            "next": [],
            "root": node in roots,
        }
        if isinstance(node, AccumulateGrad):
            var = node.variable
            item["kind"] = "leaf"
            item["tensor"] = tensors.add(var)
            item["label"] = tensors.names.get(id(var)) or f"leaf {tuple(var.shape)}"
            item["hooks"]["post_accumulate_hooks"] = len(var._post_accumulate_hooks or ())
        else:
            item["kind"] = "op"
            item["label"] = _name(node)
        for k, (child, nr) in enumerate(getattr(node, "next_functions", ())):
            if child is None:
                item["next"].append(None)
                continue
            item["next"].append([index[id(child)], nr])
            edges.append({"from": i, "to": index[id(child)], "input": k, "output_nr": nr, "norm": None})
        out_nodes.append(item)
    steps = []
    if trace is not None:
        steps = trace.steps_for(nodes, index, edges)
    described = tensors.describe()
    in_graph = {id(n.variable) for n in nodes if isinstance(n, AccumulateGrad)}
    saved_by: dict = {}
    for node in out_nodes:
        for item in node["saved"]:
            if "tensor" in item:
                saved_by.setdefault(item["tensor"], node["name"])
    outside = []
    for n, t in names.items():
        if id(t) in in_graph:
            continue
        why = (
            "requires_grad=False: no AccumulateGrad node and no .grad (a frozen parameter or a constant)"
            if not t._requires_grad
            else "requires grad, but this output does not depend on it"
        )
        k = tensors.index.get(id(t))
        if k in saved_by:
            why += f"; {saved_by[k]} saved it for another input's gradient"
        outside.append({"name": n, "shape": list(t._data.shape), "requires_grad": t._requires_grad, "why": why})
    totals = _totals(out_nodes, saved_info, module, described, stale_count)
    boxes = _boxes(module, trace)
    return {
        "title": title or "backward graph",
        "nodes": out_nodes,
        "edges": edges,
        "tensors": described,
        "steps": steps,
        "outside": outside,
        "modules": boxes,
        "idle_modules": _idle(boxes, trace),
        "totals": totals,
        "thresholds": {"vanishing": VANISHING, "exploding": EXPLODING},
    }


def _totals(out_nodes: list, saved_info: dict, module: list, tensors: list, stale: int) -> dict:
    by_module: dict = {}
    seen: set = set()
    total = 0
    for i in range(len(out_nodes)):
        for entry in saved_info[i][0]:
            if entry[6] in seen:  # an array saved by several nodes is held once
                continue
            seen.add(entry[6])
            key = module[i] or "(outside modules)"
            by_module[key] = by_module.get(key, 0) + entry[3]
            total += entry[3]
    retained = [t for t in tensors if t["retains_grad"]]
    return {
        "nodes": len(out_nodes),
        "ops": sum(n["kind"] == "op" for n in out_nodes),
        "leaves": sum(n["kind"] == "leaf" for n in out_nodes),
        "saved_bytes": total,
        "saved_by_module": dict(sorted(by_module.items(), key=lambda kv: -kv[1])),
        "stale_saved": stale,
        "retain_grad_count": len(retained),
        # a retained grad is a tensor of the tensor's size, kept until you drop it; before backward, what it will be
        "retain_grad_bytes": sum(t["grad_bytes"] if t["grad"] else t["bytes"] for t in retained),
        "hook_count": sum(
            n["hooks"]["tensor_hooks"] + n["hooks"]["pre_hooks"] + n["hooks"]["post_hooks"] for n in out_nodes
        ),
        "hook_bytes": 0,  # a hook sees the gradient as it passes and keeps nothing
    }


def page(data: dict) -> str:
    """The HTML page for ``collect``'s data: the template with the data embedded as a JSON script element."""
    template = resources.files(__package__).joinpath("explore_page.html").read_text(encoding="utf-8")
    # Inside a script element HTML still reads "</script" and "<!--" (which switches the parser into its escaped
    # states, where a later "<script" swallows the page's own script), so the data holds no "<" at all: "\u003c"
    # is the same character to JSON. ">" and "&" go the same way, for any markup the data is shown in.
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False)
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    head, tail = template.split(_PLACEHOLDER, 1)
    title = escape(data["title"])
    return head.replace("{{TITLE}}", title) + payload + tail.replace("{{TITLE}}", title)


def explore(
    output, params=None, path: str | Path | None = None, trace: Recorder | None = None, title: str | None = None
) -> str:
    """The backward graph of ``output`` as one self-contained HTML page (returned, and written to ``path``).

    ``params`` names parameters (a dict such as ``dict(model.named_parameters())``, or the model); ``trace`` is a
    :class:`Recorder` (``record(model)``) that watched the forward, for a box around each module's nodes, and
    ``backward()``, for gradient norms and the engine's order. Open the file in any browser: it needs no network.

    >>> import tempfile, trainkit
    >>> w = trainkit.ones(3, requires_grad=True)
    >>> html = explore((w * w).sum(), {"w": w}, path=Path(tempfile.mkdtemp()) / "graph.html")
    >>> html.startswith("<!DOCTYPE html>")
    True
    >>> from trainkit import nn
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 1))
    >>> with record(net) as rec:  # the forward and the backward
    ...     loss = net(trainkit.randn(5, 4)).pow(2).mean()
    ...     loss.backward()
    >>> html = explore(loss, net, trace=rec, path=Path(tempfile.mkdtemp()) / "net.html")  # boxes 0, 1, 2 and 3
    """
    html = page(collect(output, params, trace, title))
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    return html


def record(model=None) -> Recorder:
    """Record for :func:`explore`: with ``model``, which of its modules made each node of the forward run inside
    the block; and of the backward passes run inside it, the engine's order, summed gradients, gradient norms.

    Costs nothing outside the ``with`` block, and leaves no hook on the model after it. Pass the recorder to
    ``explore(..., trace=rec)`` afterwards; the graph may have been freed by an ordinary ``backward()`` by then.
    The block may be entered again (the forward in one, the backward in a later one).

    >>> import trainkit
    >>> w = trainkit.ones(2, requires_grad=True)
    >>> loss = (w * 3).sum()
    >>> with record() as rec:
    ...     loss.backward()
    >>> [s["node"] for s in collect(loss, {"w": w}, trace=rec)["steps"]]
    [0, 1, 2]
    >>> from trainkit import nn
    >>> net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    >>> with record(net) as rec:
    ...     loss = net(trainkit.ones(3, 2)).sum()
    ...     loss.backward()
    >>> [(b["name"], b["type"]) for b in collect(loss, net, trace=rec)["modules"]]
    [('0', 'Linear'), ('1', 'ReLU')]
    """
    return Recorder(model)


explore.record = record  # trainkit.autograd.explore.record(), beside explore() itself
