"""``trainkit.backends.opt_einsum`` (``torch.backends.opt_einsum``): einsum's contraction-order switches.

trainkit's ``einsum`` lets NumPy (or CuPy) choose the order, so ``enabled`` and ``strategy`` are accepted and
change nothing; ``is_available()`` says whether the ``opt_einsum`` package is importable, as in PyTorch.

>>> from trainkit.backends import opt_einsum
>>> opt_einsum.enabled
True
"""

from __future__ import annotations

import importlib.util

enabled = True
strategy = "auto"

__all__ = ["enabled", "get_opt_einsum", "is_available", "strategy"]


def is_available() -> bool:
    """True when the optional ``opt_einsum`` package is installed.

    >>> isinstance(is_available(), bool)
    True
    """
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The ``opt_einsum`` package when installed, else None.

    >>> get_opt_einsum() is None or hasattr(get_opt_einsum(), "contract")
    True
    """
    try:
        import opt_einsum  # optional package
    except ImportError:
        return None
    return opt_einsum
