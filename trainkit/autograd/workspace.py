"""Reused memory for large arrays: a bounded pool of NumPy arrays keyed by shape and dtype.

A training step allocates the same large arrays every time (a convolution's columns, its output, the gradients of
the pools). Fresh ones are expensive: glibc hands blocks of more than a few hundred KiB back to the operating
system when they are freed, so the next step's array of the same size is made of new pages, each faulted in and
zeroed by the kernel (about 5,000 page faults, 20 MB, per step of the small CNN of ``benchmarks/cnn_step.py``).
``empty`` gives out arrays from a pool instead, and takes one back into service once nothing but the pool refers to
it: an array's reference count says so, and a view counts, since it holds its base. So an array is never handed out
twice while anything can still read it, whether a graph saved it, a Tensor holds it or a user kept ``.numpy()``.

The pool holds at most ``LIMIT_BYTES`` (``TRAINKIT_WORKSPACE_MB``, 512 by default; 0 turns the pool off), evicting
free arrays of other shapes first; ``clear()`` gives all free arrays back at once, as ``torch.cuda.empty_cache``
does for PyTorch's GPU cache.
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np

__all__ = ["empty", "clear", "stats", "LIMIT_BYTES"]

# Below this size glibc's own free lists serve arrays without new pages. At 1 MiB a W2 step still faulted about
# 500 pages in (its 784 KiB activations, then left to malloc); at 256 KiB none. The price is memory the pool holds
# past an array's use: W1's traced peak per step went from 0.77x to 1.11x the NumPy limit's (its 256-512 KiB
# gradients stay pooled).
MIN_BYTES = 256 << 10


def _limit_from_environment() -> int:
    text = os.environ.get("TRAINKIT_WORKSPACE_MB", "") or "512"
    try:
        mib = float(text)
    except ValueError:
        mib = -1.0
    if not mib >= 0:  # also refuses nan
        raise ValueError(f"TRAINKIT_WORKSPACE_MB={text!r} is not a size: give the pool's limit in MiB (0 turns it off)")
    return int(mib * (1 << 20))


LIMIT_BYTES = _limit_from_environment()

_pools: dict = {}  # (shape, dtype) -> arrays given out at least once, oldest first
_held = [0]  # bytes of all the arrays in _pools
_lock = threading.Lock()  # the convolution's threads take arrays at the same time
_getrefcount = sys.getrefcount


def _first_free(arrays: list, free: int):
    """The first of ``arrays`` that nothing but the pool holds (``free``: the count such an array shows here)."""
    for a in arrays:
        if _getrefcount(a) == free:
            return a
    return None


def _free_count() -> int:
    """The reference count ``_first_free`` sees for an array that only the pool's list holds: measured through
    ``_first_free`` itself, since it depends on the Python version."""
    arrays = [np.empty(1)]
    return next(count for count in range(1, 16) if _first_free(arrays, count) is not None)


_FREE = _free_count()


def empty(shape: tuple, dtype, xp=np):
    """An uninitialised array of ``shape`` and ``dtype``, from the pool when it is large and a NumPy array.

    Take it only for an array that is then written whole (or filled) before anything reads it.

    >>> a = empty((512, 256), np.float32)
    >>> a.shape, a.dtype
    ((512, 256), dtype('float32'))
    """
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize
    for s in shape:
        nbytes *= s
    if xp is not np or nbytes < MIN_BYTES or nbytes > LIMIT_BYTES:
        return xp.empty(shape, dtype)
    key = (tuple(shape), dtype)
    with _lock:
        arrays = _pools.get(key)
        if arrays is not None:
            found = _first_free(arrays, _FREE)
            if found is not None:
                return found
        if _held[0] + nbytes > LIMIT_BYTES:
            _evict(_held[0] + nbytes - LIMIT_BYTES)
            if _held[0] + nbytes > LIMIT_BYTES:  # the rest is in use: this one is an ordinary array
                return np.empty(shape, dtype)
        a = np.empty(shape, dtype)
        _pools.setdefault(key, []).append(a)
        _held[0] += nbytes
        return a


def _evict(need: int) -> None:
    """Drop free arrays, of the shapes first given out first, until ``need`` bytes are gone or none is left."""
    for key in list(_pools):
        arrays = _pools[key]
        keep = []
        for a in arrays:
            if need > 0 and _getrefcount(a) == _FREE:
                need -= a.nbytes
                _held[0] -= a.nbytes
            else:
                keep.append(a)
        if keep:
            _pools[key] = keep
        else:
            del _pools[key]
        if need <= 0:
            return


def clear() -> int:
    """Give every free array of the pool back to the allocator; arrays in use leave the pool and are freed when
    their last holder lets go. Returns the bytes released now.

    >>> clear() >= 0
    True
    """
    with _lock:
        free = sum(a.nbytes for arrays in _pools.values() for a in arrays if _getrefcount(a) == _FREE)
        _pools.clear()
        _held[0] = 0
    return free


def stats() -> dict:
    """What the pool holds: ``{"bytes": ..., "arrays": ..., "in_use": ...}``.

    >>> sorted(stats())
    ['arrays', 'bytes', 'in_use']
    """
    with _lock:
        arrays = [a for group in _pools.values() for a in group]
        in_use = sum(1 for a in arrays if _getrefcount(a) > _FREE + 1)  # + 1: this list holds each one too
        return {"bytes": _held[0], "arrays": len(arrays), "in_use": in_use}


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
