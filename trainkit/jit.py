"""``trainkit.jit`` (``torch.jit``): trainkit has no TorchScript; its decorators pass functions through.

``script`` and ``trace`` raise ``RuntimeError`` saying so (call the module or function directly: it runs as Python
already). ``ignore``, ``unused``, ``export`` and ``script_if_tracing`` return what they decorate unchanged;
``is_scripting`` and ``is_tracing`` are False.

>>> import trainkit
>>> @trainkit.jit.ignore
... def helper(x):
...     return x + 1
>>> helper(1)
2
>>> trainkit.jit.is_scripting()
False
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "Error",
    "export",
    "ignore",
    "is_scripting",
    "is_tracing",
    "load",
    "save",
    "script",
    "script_if_tracing",
    "trace",
    "unused",
]

NO_TORCHSCRIPT = (
    "trainkit has no TorchScript: torch.jit.{name} cannot compile {what}; call the module or function directly "
    "(it runs as Python), and save weights with trainkit.save(model.state_dict(), path)"
)


class Error(RuntimeError):
    """``torch.jit.Error``: what ``script``, ``trace``, ``save`` and ``load`` raise.

    >>> issubclass(Error, RuntimeError)
    True
    """


def describe(obj: Any) -> str:
    """How the error names what was handed in.

    >>> describe(len)
    'len'
    """
    return getattr(obj, "__qualname__", None) or type(obj).__name__


def script(obj: Any = None, *args: Any, **kwargs: Any):
    """Refuses: trainkit has no TorchScript compiler.

    >>> script(len)
    Traceback (most recent call last):
    trainkit.jit.Error: trainkit has no TorchScript: torch.jit.script cannot compile len; ...
    """
    raise Error(NO_TORCHSCRIPT.format(name="script", what=describe(obj)))


def trace(func: Any = None, *args: Any, **kwargs: Any):
    """Refuses: trainkit has no TorchScript tracer.

    >>> trace(len)
    Traceback (most recent call last):
    trainkit.jit.Error: trainkit has no TorchScript: torch.jit.trace cannot compile len; ...
    """
    raise Error(NO_TORCHSCRIPT.format(name="trace", what=describe(func)))


def save(m: Any, f: Any, *args: Any, **kwargs: Any) -> None:
    """Refuses: there is no TorchScript module to save.

    >>> save(None, "model.pt")
    Traceback (most recent call last):
    trainkit.jit.Error: trainkit has no TorchScript: torch.jit.save cannot compile NoneType; ...
    """
    raise Error(NO_TORCHSCRIPT.format(name="save", what=describe(m)))


def load(f: Any, *args: Any, **kwargs: Any):
    """Refuses: trainkit cannot run TorchScript archives (``trainkit.load`` reads ``torch.save`` files).

    >>> load("model.pt")
    Traceback (most recent call last):
    trainkit.jit.Error: trainkit has no TorchScript: torch.jit.load cannot compile str; ...
    """
    raise Error(NO_TORCHSCRIPT.format(name="load", what=describe(f)))


def ignore(drop: Any = False, **kwargs: Any):
    """The function unchanged, as ``@torch.jit.ignore`` and ``@torch.jit.ignore(drop=True)`` leave eager code.

    >>> ignore(len) is len and ignore(drop=True)(len) is len
    True
    """
    if callable(drop):
        return drop
    return pass_through


def unused(fn: Callable) -> Callable:
    """The function unchanged, as ``@torch.jit.unused`` leaves eager code.

    >>> unused(len) is len
    True
    """
    return fn


def export(fn: Callable) -> Callable:
    """The function unchanged, as ``@torch.jit.export`` leaves eager code.

    >>> export(len) is len
    True
    """
    return fn


def script_if_tracing(fn: Callable) -> Callable:
    """The function unchanged: nothing is ever traced.

    >>> script_if_tracing(len) is len
    True
    """
    return fn


def pass_through(fn: Callable) -> Callable:
    """The decorator that ``ignore(drop=...)`` returns: it gives the function back.

    >>> pass_through(len) is len
    True
    """
    return fn


def is_scripting() -> bool:
    """False: code never runs under TorchScript.

    >>> is_scripting()
    False
    """
    return False


def is_tracing() -> bool:
    """False: code never runs under the tracer.

    >>> is_tracing()
    False
    """
    return False
