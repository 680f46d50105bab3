"""``trainkit.cuda``: what PyTorch code asks about GPUs."""

from __future__ import annotations

from .autograd.backend import _load_cupy, cuda_is_available


def is_available() -> bool:
    """True when CuPy imports and a GPU answers.

    >>> isinstance(is_available(), bool)
    True
    """
    return cuda_is_available()


def device_count() -> int:
    """How many GPUs CuPy sees (0 without CuPy)."""
    if not cuda_is_available():
        return 0
    return _load_cupy().cuda.runtime.getDeviceCount()


def synchronize() -> None:
    """Wait for all work queued on the current GPU to finish."""
    if cuda_is_available():
        _load_cupy().cuda.Device().synchronize()


def manual_seed(seed: int) -> None:
    """Seed the GPUs' streams (``trainkit.manual_seed`` seeds them all already)."""
    from .autograd.random import manual_seed as seed_all

    seed_all(seed)


manual_seed_all = manual_seed
