"""``trainkit.backends.mps`` (``torch.backends.mps``): Apple's Metal backend, which trainkit does not have.

>>> from trainkit.backends import mps
>>> mps.is_available(), mps.is_built()
(False, False)
"""

from __future__ import annotations

__all__ = ["is_available", "is_built", "is_macos13_or_newer"]


def is_available() -> bool:
    """False: trainkit runs on CPUs (NumPy) and NVIDIA GPUs (CuPy), never on Metal.

    >>> is_available()
    False
    """
    return False


def is_built() -> bool:
    """False: no Metal backend is built in.

    >>> is_built()
    False
    """
    return False


def is_macos13_or_newer(minor: int = 0) -> bool:
    """False: asked only before using Metal, which trainkit never does.

    >>> is_macos13_or_newer()
    False
    """
    return False
