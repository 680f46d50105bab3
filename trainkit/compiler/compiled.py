"""``trainkit.compile``: the compiled function and module, and the cache of plans behind them.

The first call for an input signature (the tensor arguments' shapes, dtypes, devices and ``requires_grad``, and
the other arguments' values) runs eagerly under capture; the plan it gives is filed under that signature. Later
calls replay it while its guards hold (see ``guards``); when one fails the region is captured again. A cache keeps
at most ``CACHE_SIZE`` plans per compiled object. A region that cannot be replayed runs eagerly, and the reason is
kept: ``explain()`` lists it; with ``fullgraph=True`` it raises ``CompileError`` instead.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

from ..autograd import grad_mode
from ..layers.module import Module
from .capture import escaped, flatten, run_captured, signature
from .codegen import generate
from .errors import CompileError
from .explain import report
from .guards import Guards
from .plan import BackwardStep, Refused, build
from .replay import boundary_node, deliver, rebuild, replay, run_call, spent_node
from .state import anchors, carried, watch_points

CACHE_SIZE = 8
MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs")


class Entry:
    """One cached capture: its plan, or the reason it runs eagerly, under the key and guards it was made for."""

    __slots__ = ("key", "plan", "reason", "guards", "replays", "lock")

    def __init__(self, key, plan, reason, guards):
        self.key, self.plan, self.reason, self.guards, self.replays = key, plan, reason, guards, 0
        self.lock = threading.Lock()


class CompiledFunction:
    """A function whose calls replay captured plans (what ``trainkit.compile(fn)`` returns).

    >>> import trainkit
    >>> w = trainkit.tensor([2.0], requires_grad=True)
    >>> f = trainkit.compile(lambda x: (x * w).sum())
    >>> f(trainkit.tensor([3.0])), f(trainkit.tensor([4.0]))  # the first call runs eagerly, captured
    (tensor(6., grad_fn=<SumBackward0>), tensor(8., grad_fn=<CompiledFunctionBackward>))
    """

    def __init__(
        self, fn: Callable, fullgraph: bool = False, dynamic: bool | None = None, eager: bool = False, watch=()
    ):
        self.fn = fn
        self.watch = tuple(watch)  # modules guarded though the region does not call them
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.eager = eager
        self.entries: list[Entry] = []
        self.fallbacks: list[str] = []  # why a call ran eagerly or captured again, newest last
        self.counts = {"captures": 0, "replays": 0, "eager": 0}
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        if self.eager:
            return self.fn(*args, **kwargs)
        structure, tensors = flatten(args, kwargs)
        key = (structure, signature(tensors), grad_mode.state.enabled)
        stale = None
        for entry in self.entries:
            if entry.key != key:
                continue
            failed = entry.guards.check()
            if failed is not None:
                stale = (entry, failed)
                continue
            # the lock is taken while a replay runs: a call from inside it, or from another thread, runs eagerly
            if entry.plan is None or not entry.lock.acquire(blocking=False):
                self.counts["eager"] += 1
                return self.fn(*args, **kwargs)
            if entry.replays and entry.plan.code is None:  # what the first replay saw shapes the code
                try:
                    entry.plan.code = generate(entry.plan, run_call, rebuild, boundary_node, spent_node, deliver)
                except BaseException:
                    entry.lock.release()
                    raise
            entry.replays += 1
            self.counts["replays"] += 1
            try:  # a replay's nodes and arrays are its own until it returns
                return replay(entry.plan, tensors, functools.partial(self.fn, *args, **kwargs))
            finally:
                entry.lock.release()
        if stale is not None:
            self.entries.remove(stale[0])
            self.note(f"captured again: {stale[1]}")
        return self.capture(key, args, kwargs, tensors)

    def capture(self, key, args, kwargs, tensors):
        self.counts["captures"] += 1
        result, rec = run_captured(self.fn, args, kwargs, tensors, self.fullgraph, self.watch)
        modules = list(rec.modules.values())
        inputs = set(rec.args) | {s for s, _ in rec.externals}
        stores, located = carried(self.fn, modules, rec.slot_of, inputs, rec.externals, rec.places)
        # tensors the region made and stored where it finds them next time are state, not a name to guard
        points = [p for p in watch_points(self.fn, modules) if rec.slot_of.get(id(p[2]), -1) in inputs | {-1}]
        guards = Guards(key[2], modules, rec.externals, leaves(rec), points, located, anchors(self.fn, modules))
        plan, reason = None, rec.refusal
        if reason is None:
            whole = (result, *(value for _, _, value in stores)) if stores else result
            try:
                plan = build(rec, result, guards, tuple(value for _, _, value in stores))
                plan.stores = tuple((container, key) for container, key, _ in stores)
                plan.located = tuple(located)
            except Refused as why:
                reason = str(why)
            reason = reason or escaped(rec, whole)
            if reason is not None:
                plan = None
        if reason is not None:
            self.note(f"runs eagerly: {reason}")
            if self.fullgraph:
                raise CompileError(reason)
        if len(self.entries) >= CACHE_SIZE:
            self.entries.pop(0)
            self.note(f"a plan was dropped: more than {CACHE_SIZE} signatures")
        self.entries.append(Entry(key, plan, reason, guards))
        return result

    def note(self, text: str) -> None:
        self.fallbacks.append(text)
        del self.fallbacks[:-20]

    def explain(self, file=None) -> str:
        """Print (and return) the plans: their kernels, buffers and bytes, guards, and why anything ran eagerly."""
        text = report(self)
        print(text, file=file)
        return text


def leaves(rec) -> set:
    """The ids of the leaf tensors a backward pass of the region reaches (their hooks are guarded)."""
    out = set()
    for step in rec.steps:
        if isinstance(step, BackwardStep):
            out.update(id(rec.tensors[slot]) for slot, _, _ in step.schedule.exits)
    return out


class OptimizedModule(Module):
    """A module whose forward is compiled (what ``trainkit.compile(module)`` returns, as torch's
    ``OptimizedModule``): the original is ``_orig_mod``, and its parameters, state dict (keys prefixed
    ``_orig_mod.``), ``train()``/``eval()`` and attributes are reached through it.

    >>> import trainkit
    >>> model = trainkit.compile(trainkit.nn.Linear(2, 1))
    >>> type(model).__name__, list(model.state_dict())
    ('OptimizedModule', ['_orig_mod.weight', '_orig_mod.bias'])
    """

    def __init__(self, mod: Module, compiled: CompiledFunction):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "compiled", compiled)

    def forward(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks:
            return super().__call__(*args, **kwargs)
        return self.compiled(*args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    def explain(self, file=None) -> str:
        """Print (and return) the compiled forward's plans (see ``CompiledFunction.explain``)."""
        return self.compiled.explain(file)


def compile(
    model: Callable | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable | None = "inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
):
    """Capture ``model`` (a function or a ``Module``) once per input signature and replay it as a flat list of
    array kernels, as ``torch.compile``; usable as a decorator, with or without arguments.

    A compiled function may hold a whole training step (forward, loss, ``backward()``, ``optimizer.step()``,
    ``zero_grad()``); a compiled module's outputs carry one graph node whose backward replays the captured
    backward. Whatever cannot be replayed (``.item()`` inside the region, dropout's random numbers, hooks) runs
    eagerly, with the reason in ``explain()``; ``fullgraph=True`` raises ``CompileError`` instead. ``dynamic``,
    ``mode`` and ``options`` are accepted as torch takes them; every shape gets a plan of its own. ``backend``
    "eager" runs the model as it is.

    >>> import trainkit
    >>> @trainkit.compile
    ... def f(x):
    ...     return (x * 2).sum()
    >>> f(trainkit.ones(3))
    tensor(6.)
    """
    if model is None:
        return functools.partial(
            compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
        )
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(MODES)}")
    if callable(backend):
        raise NotImplementedError("a callable backend is not supported: trainkit.compile has its own replay")
    if backend is not None and backend not in BACKENDS:
        raise RuntimeError(
            f"Invalid backend: {backend!r}, see `trainkit.compiler.list_backends()` for available backends."
        )
    if not callable(model):
        raise RuntimeError("compile() expects a function or a Module")
    if disable:
        return model
    eager = backend == "eager"
    if isinstance(model, Module):
        # through the class's __call__ at each call, so that a capture sees the module itself called
        return OptimizedModule(model, CompiledFunction(functools.partial(_call, model), fullgraph, dynamic, eager))
    return CompiledFunction(model, fullgraph, dynamic, eager)


def _call(module: Module, *args, **kwargs):
    return module(*args, **kwargs)


def _forward(module: Module, *args, **kwargs):
    return type(module).forward(module, *args, **kwargs)


def compile_forward(module: Module, **options) -> CompiledFunction:
    """The module's ``forward`` compiled, without its hooks and without wrapping the module: a callable whose
    outputs are the module's, for code that keeps the module itself (its state dict keys unchanged, as a Trainer
    needs). The module's training flag, parameters and hooks are guarded as for ``compile(module)``.

    >>> import trainkit
    >>> layer = trainkit.nn.Linear(2, 1)
    >>> forward = compile_forward(layer)
    >>> forward(trainkit.ones(3, 2)).shape
    trainkit.Size([3, 1])
    """
    options.setdefault("fullgraph", False)
    return CompiledFunction(
        functools.partial(_forward, module), options["fullgraph"], options.get("dynamic"), False, (module,)
    )


def list_backends() -> list[str]:
    """The backend names ``compile`` takes.

    >>> list_backends()
    ['aot_eager', 'cudagraphs', 'eager', 'inductor']
    """
    return sorted(BACKENDS)
