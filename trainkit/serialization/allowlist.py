"""The globals ``trainkit.load(weights_only=True)`` accepts beyond tensors and plain containers, as
``torch.serialization.add_safe_globals`` keeps them: classes and functions the user trusts, each named by its
module and qualified name (or by the name given with it).

>>> class Point:
...     pass
>>> add_safe_globals([Point])
>>> Point in get_safe_globals()
True
>>> with safe_globals([(dict, "mymodule.Table")]):
...     lookup("mymodule", "Table")
<class 'dict'>
>>> clear_safe_globals()
>>> get_safe_globals()
[]
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = [
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "lookup",
    "safe_globals",
    "unsupported_global_message",
]

# Entries as given (an object, or (object, "module.name")), in order; shared by every thread, as torch's list is.
_ENTRIES: list[Any] = []
_LOCK = threading.Lock()


def _qualified_name(entry: Any) -> str:
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError(f"a safe global given as a tuple is (object, 'module.name'), got {entry!r}")
        return entry[1]
    module, name = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    if module is None or name is None:
        raise TypeError(
            f"cannot allowlist {entry!r}: it has no __module__ and __qualname__ to be found by in a file; "
            "pass (object, 'module.name')"
        )
    return f"{module}.{name}"


def add_safe_globals(safe_globals: list[Callable | tuple[Callable, str]]) -> None:
    """Trust these classes and functions in files loaded with ``weights_only=True`` (``torch.serialization``'s
    function): a class named in a file may then be instantiated and its state set, a function called.

    >>> add_safe_globals([complex]); complex in get_safe_globals(); clear_safe_globals()
    True
    """
    if not isinstance(safe_globals, (list, tuple)):
        raise TypeError(f"add_safe_globals takes a list of classes and functions, got {type(safe_globals).__name__}")
    for entry in safe_globals:
        _qualified_name(entry)  # a bad entry is refused here, not at load time
    with _LOCK:
        _ENTRIES.extend(entry for entry in safe_globals if entry not in _ENTRIES)


def get_safe_globals() -> list[Callable | tuple[Callable, str]]:
    """The classes and functions added with ``add_safe_globals`` (a copy).

    >>> isinstance(get_safe_globals(), list)
    True
    """
    with _LOCK:
        return list(_ENTRIES)


def clear_safe_globals() -> None:
    """Forget every class and function added with ``add_safe_globals``.

    >>> clear_safe_globals(); get_safe_globals()
    []
    """
    with _LOCK:
        _ENTRIES.clear()


class safe_globals:  # noqa: N801 - torch's name for the context manager
    """Trust these classes and functions inside a ``with`` block only, as ``torch.serialization.safe_globals``.

    >>> with safe_globals([complex]):
    ...     complex in get_safe_globals()
    True
    >>> complex in get_safe_globals()
    False
    """

    def __init__(self, safe_globals: list[Callable | tuple[Callable, str]]):
        self.safe_globals = list(safe_globals)
        self.added: list[Any] = []

    def __enter__(self) -> None:
        before = get_safe_globals()
        add_safe_globals(self.safe_globals)
        self.added = [entry for entry in self.safe_globals if entry not in before]

    def __exit__(self, *exc_info: object) -> None:
        # only what this block added goes: what was trusted before, or added inside the block, stays
        with _LOCK:
            _ENTRIES[:] = [entry for entry in _ENTRIES if entry not in self.added]


def lookup(module: str, name: str) -> Any | None:
    """The allowlisted object a file names as ``module.name``, or None.

    >>> lookup("builtins", "eval") is None
    True
    """
    wanted = f"{module}.{name}"
    for entry in get_safe_globals():
        if _qualified_name(entry) == wanted:
            return entry[0] if isinstance(entry, tuple) else entry
    return None


def unsupported_global_message(module: str, name: str, where: str = "the file") -> str:
    """torch's words for a global that ``weights_only=True`` refuses, naming trainkit's functions.

    >>> "Unsupported global: GLOBAL __main__.Net was not" in unsupported_global_message("__main__", "Net")
    True
    """
    qualified = f"{module}.{name}"
    return (
        "Weights only load failed. This file can still be loaded, to do so you have two options, do those steps "
        "only if you trust the source of the checkpoint. \n\t(1) trainkit.load defaults to weights_only=True, as "
        "torch.load does since PyTorch 2.6. Re-running `trainkit.load` with `weights_only` set to `False` will "
        "likely succeed, but it can result in arbitrary code execution. Do it only if you got the file from a "
        "trusted source.\n\t(2) Alternatively, to load with `weights_only=True` please check the recommended steps "
        "in the following error message.\n\tWeightsUnpickler error: Unsupported global: GLOBAL "
        f"{qualified} was not an allowed global by default. Please use "
        f"`trainkit.serialization.add_safe_globals([{qualified}])` or the "
        f"`trainkit.serialization.safe_globals([{qualified}])` context manager to allowlist this global if you "
        f"trust this class/function.\n\nNothing in {where} was run: the global '{qualified}' was refused before "
        "it was looked up."
    )
