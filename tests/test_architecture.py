"""The house rules of the package layout, checked on the source (docs/architecture.md draws them).

- no file in the package over 600 lines; the engine at most 300, the trainer at most 400;
- imports point down only: a module imports from its own layer or the ones below (see ``LAYERS``), at module
  level and inside functions alike;
- the autograd core has no import cycle at module level, and imports nothing inside functions but optional
  packages;
- no module imports another's private (underscored) names, nor reaches into another's private attributes
  (``obj._name`` where ``obj`` is not ``self``/``cls``/``super()`` and the module neither defines nor assigns
  ``_name``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "trainkit"

# Bottom to top. A module may import from its own layer and the ones below it.
LAYERS = [
    ("trainkit.autograd",),
    ("trainkit.functional",),
    (
        "trainkit.layers",
        "trainkit.nn",
        "trainkit.optim",
        "trainkit.data",
        "trainkit.utils",
        "trainkit.metrics",
        "trainkit.serialization",
        "trainkit.torch_pickle",
        "trainkit.distributed",
        "trainkit.cuda",
        "trainkit.amp",
        "trainkit.datasets",
        "trainkit.transforms",
        "trainkit.training",
        "trainkit.training.run_folder",
    ),
    ("trainkit.training.checkpoint", "trainkit.callbacks", "trainkit.compiler"),
    ("trainkit.registry", "trainkit.training.strategy", "trainkit.training.loop"),
    ("trainkit.trainer",),
    ("trainkit.cli", "trainkit"),  # the command, and the package root that gathers everything
]
MAX_LINES = {"autograd/engine.py": 300, "trainer.py": 400}
# private in PyTorch too (torch.nn.init._calculate_fan_in_and_fan_out, torch.nn.modules.loss._Loss), so kept so
TORCH_PRIVATE = {"_calculate_fan_in_and_fan_out", "_Loss", "_WeightedLoss", "_BatchNorm", "_DropoutNd"}
# Private names we must reach from outside their module, each with the reason.
PRIVATE_ALLOWED = {
    "_calculate_fan_in_and_fan_out": "torch.nn.init's own name, private in PyTorch too",
    "_Loss": "torch.nn.modules.loss's base class, private in PyTorch too",
    "_WeightedLoss": "torch.nn.modules.loss's base class, private in PyTorch too",
    "_BatchNorm": "torch.nn.modules.batchnorm's base class, private in PyTorch too",
    "_DropoutNd": "torch.nn.modules.dropout's base class, private in PyTorch too",
    "_qkv_same_embed_dim": "torch.nn.MultiheadAttention's attribute of that name, private in PyTorch too",
    "_getframe": "sys._getframe: CPython's one way to find the caller's frame (warnings at the user's line)",
    "_get_file_writer": "torch.utils.tensorboard.SummaryWriter's writer, private in PyTorch too",
}
# Tensor's fields that ops are written with: its array and the Tensor around an array made without a copy, its
# dimension count, autograd's bookkeeping. They stay private so that users see PyTorch's Tensor, and only the layers
# that implement ops, optimizers and tensor files (below the callbacks) may use them; above those, public names only.
TENSOR_PROTOCOL = {"_data", "_make", "_dim", "_grad", "_grad_fn", "_requires_grad", "_version_counter", "_saved"}
OP_LAYERS = (
    "trainkit.functional",
    "trainkit.layers",
    "trainkit.optim",
    "trainkit.distributed",
    "trainkit.serialization",
    "trainkit.data",
    "trainkit.metrics",
)
OPTIONAL = {"cupy", "cupyx", "scipy", "matplotlib", "mpi4py", "sklearn", "tqdm", "safetensors", "tensorboardX"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = ("trainkit",) + path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path):
    """Yield ``(target module, line, inside a function)`` for every trainkit-internal import of a module, and
    ``(top-level package, line, True)`` for other imports made inside functions."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # names for annotations only: never imported when the program runs
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno, in_function
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                # ``from pkg import sub``: the edge goes to the submodule when there is one
                subs = [f"{module}.{a.name}" for a in child.names if f"{module}.{a.name}" in MODULES]
                if subs and len(subs) == len(child.names):
                    for sub in subs:
                        yield sub, child.lineno, in_function
                else:
                    yield module, child.lineno, in_function
            else:
                yield from visit(child, nested)

    yield from visit(tree, False)


def _owner(module: str) -> str | None:
    """The module itself if it is one of ours, else its nearest enclosing module of ours (a name it imports)."""
    while module and module not in MODULES:
        module = module.rpartition(".")[0]
    return module or None


def _layer(module: str) -> int:
    best, rank = "", None
    for i, names in enumerate(LAYERS):
        for prefix in names:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, rank = prefix, i
    assert rank is not None, f"{module} belongs to no layer in LAYERS: place it there"
    return rank


@pytest.mark.parametrize("name", sorted(MODULES))
def test_file_size(name):
    path = MODULES[name]
    lines = len(path.read_text().splitlines())
    limit = MAX_LINES.get(path.relative_to(ROOT).as_posix(), 600)
    assert lines <= limit, f"{path.relative_to(ROOT.parent)} has {lines} lines; the limit is {limit}: split it"


def test_imports_point_down():
    upward = []
    for name, path in MODULES.items():
        for target, line, _ in _imports(name, path):
            owner = _owner(target) if target.startswith("trainkit") else None
            if owner and _layer(owner) > _layer(name):
                upward.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target} (a layer above)")
    assert not upward, "\n".join(upward)


def test_no_function_level_imports_in_autograd():
    hidden = []
    for name, path in MODULES.items():
        if not name.startswith("trainkit.autograd"):
            continue
        for target, line, in_function in _imports(name, path):
            if in_function and target.partition(".")[0] not in OPTIONAL:
                hidden.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target} inside a function")
    assert not hidden, "\n".join(hidden)


def test_no_module_imports_private_names_of_another():
    private = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("trainkit")):
                for alias in node.names:
                    if (
                        alias.name.startswith("_")
                        and not alias.name.startswith("__")
                        and alias.name not in TORCH_PRIVATE
                    ):
                        private.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} imports {alias.name}")
    assert not private, "make these names public, or keep their use inside their module:\n" + "\n".join(private)


def _defined(tree: ast.AST) -> set[str]:
    """Every name a module defines or assigns: functions, classes, variables, arguments, attributes stored or
    deleted, imported names, and strings that are identifiers (``object.__setattr__(self, "_x", ...)``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.rpartition(".")[2])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return names


def _private_accesses(path: Path) -> list[str]:
    """``file:line obj._name`` for each attribute access to a private name of another module."""
    tree = ast.parse(path.read_text(), str(path))
    own = _defined(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name, owner = node.attr, node.value
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        if name in own or name in PRIVATE_ALLOWED:
            continue
        found.append((node.lineno, node.col_offset, ast.unparse(node)))
    shown = path.relative_to(ROOT.parent) if path.is_relative_to(ROOT) else path.name
    return [f"{shown}:{line} {text}" for line, _, text in sorted(found)]


def _allowed(name: str, hit: str) -> bool:
    """The core reaches into its own modules' fields; the op layers use Tensor's protocol; nothing else may."""
    attr = hit.rpartition(".")[2]
    if name.startswith(("trainkit.autograd.", "trainkit.compiler.")):
        # one package: Tensor, Node and the engine share their fields as PyTorch's C++ core does; the compiler
        # replays the core's nodes on arrays, as PyTorch's compiler reaches into its autograd
        return True
    return attr in TENSOR_PROTOCOL and any(name == p or name.startswith(p + ".") for p in OP_LAYERS)


def test_no_module_reaches_into_private_attributes_of_another():
    hits = [hit for name, path in MODULES.items() for hit in _private_accesses(path) if not _allowed(name, hit)]
    assert not hits, "make these names public (a property or method with a docstring) and use that:\n" + "\n".join(hits)


def _cycles(graph: dict[str, set]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    return found


def test_no_module_level_cycle_in_autograd():
    core = {n: p for n, p in MODULES.items() if n.startswith("trainkit.autograd")}
    # a package's __init__ gathers its submodules; a submodule reaching back to it is what closes a cycle
    graph = {n: set() for n in core}
    for name, path in core.items():
        for target, _, in_function in _imports(name, path):
            owner = _owner(target) if target.startswith("trainkit") else None
            if not in_function and owner in core and owner != name:
                graph[name].add(owner)
    cycles = _cycles(graph)
    assert not cycles, "import cycles among autograd modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checks_catch_what_they_look_for(tmp_path):
    """The helpers above see an upward import, a hidden import and a cycle when there is one."""
    assert _layer("trainkit.functional.loss") == 1 and _layer("trainkit.cli") == 6
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    path = tmp_path / "m.py"
    path.write_text("from .. import layers\n\ndef f():\n    from . import grad_mode\n")
    found = list(_imports("trainkit.autograd.m", path))
    assert ("trainkit.layers", 1, False) in found and ("trainkit.autograd.grad_mode", 4, True) in found
    path.write_text(
        "class A:\n    def f(self, other):\n        self._own = other._theirs\n"
        "        return self._x, cls._y, super()._z, other.__len__, other._own, other._fan_in_and_out\n"
        "\n\nobject.__setattr__(A, '_set', 1)\nA()._set, A()._unset\n"
    )
    hits = [hit.split(" ", 1)[1] for hit in _private_accesses(path)]
    assert hits == ["other._theirs", "other._fan_in_and_out", "A()._unset"]
    assert _allowed("trainkit.functional.loss", "x._data") and _allowed("trainkit.autograd.api", "n._hooks")
    assert not _allowed("trainkit.functional.loss", "n._hooks") and not _allowed("trainkit.callbacks.plot", "x._data")
