"""``trainkit.compile``: capture a step once, replay it as a flat list of array kernels.

The first call of a compiled function or module for an input signature runs eagerly while ``capture`` notes each
op, backward pass and optimizer update; ``plan`` turns the notes into steps on raw arrays and a backward schedule
in the engine's order; ``replay`` runs them on later calls while the ``guards`` hold; ``explain`` prints it all.
See docs/compile.md.

>>> import trainkit
>>> model = trainkit.compile(trainkit.nn.Linear(3, 1))
>>> model(trainkit.ones(2, 3)).shape
trainkit.Size([2, 1])
"""

from __future__ import annotations

from .compiled import CompiledFunction, OptimizedModule, compile, compile_forward, list_backends
from .errors import CompileError
from .explain import report
from .training import compile_train_step


def explain(fn, *args, **kwargs) -> str:
    """Compile ``fn`` (a function or module, or one compiled already), call it once with ``args`` and print (and
    return) its plan: kernels, buffers and bytes, guards, and what runs eagerly and why.

    >>> import trainkit
    >>> text = explain(lambda x: x.exp().sum(), trainkit.ones(2))  # doctest: +ELLIPSIS
    compiled <lambda>: 1 plan, 1 capture, 0 replays, 0 eager calls
    ...
    """
    compiled = fn if isinstance(fn, (CompiledFunction, OptimizedModule)) else compile(fn)
    compiled(*args, **kwargs)
    inner = compiled.compiled if isinstance(compiled, OptimizedModule) else compiled
    text = report(inner)
    print(text)
    return text


__all__ = [
    "CompileError",
    "CompiledFunction",
    "OptimizedModule",
    "compile",
    "compile_forward",
    "compile_train_step",
    "explain",
    "list_backends",
]
