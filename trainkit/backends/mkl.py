"""``trainkit.backends.mkl`` (``torch.backends.mkl``): whether Intel MKL is PyTorch's BLAS; trainkit's is NumPy's.

>>> from trainkit.backends import mkl
>>> mkl.is_available()
False
"""

from __future__ import annotations

__all__ = ["is_available"]


def is_available() -> bool:
    """False: trainkit calls no MKL of its own (NumPy may use one underneath).

    >>> is_available()
    False
    """
    return False
