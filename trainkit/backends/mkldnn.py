"""``trainkit.backends.mkldnn`` (``torch.backends.mkldnn``): oneDNN's switches, accepted and without effect.

>>> from trainkit.backends import mkldnn
>>> mkldnn.is_available(), mkldnn.enabled
(False, True)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

enabled = True
deterministic = False

__all__ = ["deterministic", "enabled", "flags", "is_available"]


def is_available() -> bool:
    """False: trainkit computes with NumPy or CuPy, not oneDNN.

    >>> is_available()
    False
    """
    return False


@contextlib.contextmanager
def flags(enabled: bool = False, deterministic: bool = False) -> Iterator[None]:
    """Sets ``enabled`` and ``deterministic`` inside the ``with`` block and restores them after.

    >>> with flags(enabled=False):
    ...     sys.modules[__name__].enabled
    False
    """
    module = sys.modules[__name__]
    saved = (module.enabled, module.deterministic)
    module.enabled, module.deterministic = enabled, deterministic
    try:
        yield
    finally:
        module.enabled, module.deterministic = saved
