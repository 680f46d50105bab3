"""``trainkit.backends.cudnn`` (``torch.backends.cudnn``): cuDNN's switches, accepted and without effect.

trainkit's convolutions are its own (im2col, Winograd) on NumPy or CuPy, never cuDNN's: ``benchmark``,
``deterministic``, ``enabled`` and ``allow_tf32`` keep what a program sets and change nothing (trainkit's kernels
are deterministic for a given seed whatever ``deterministic`` says). ``is_available()`` is False, as on PyTorch's
CPU build.

>>> from trainkit.backends import cudnn
>>> cudnn.benchmark, cudnn.deterministic, cudnn.enabled
(False, False, True)
>>> with cudnn.flags(enabled=False):
...     cudnn.enabled
False
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

enabled = True
benchmark = False
benchmark_limit = None
deterministic = False
allow_tf32 = True

__all__ = [
    "allow_tf32",
    "benchmark",
    "benchmark_limit",
    "deterministic",
    "enabled",
    "flags",
    "is_acceptable",
    "is_available",
    "version",
]


def is_available() -> bool:
    """False: trainkit never calls cuDNN.

    >>> is_available()
    False
    """
    return False


def is_acceptable(tensor) -> bool:
    """False: no tensor goes to cuDNN.

    >>> is_acceptable(None)
    False
    """
    return False


def version() -> int | None:
    """None: no cuDNN library is loaded.

    >>> version() is None
    True
    """
    return None


@contextlib.contextmanager
def flags(
    enabled: bool = False, benchmark: bool = False, deterministic: bool = False, allow_tf32: bool = True
) -> Iterator[None]:
    """Sets the four switches inside the ``with`` block and restores them after, as ``torch.backends.cudnn.flags``.

    >>> with flags(enabled=True, deterministic=True):
    ...     sys.modules[__name__].deterministic
    True
    """
    module = sys.modules[__name__]
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    saved = {name: getattr(module, name) for name in names}
    for name, value in zip(names, (enabled, benchmark, deterministic, allow_tf32)):
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
