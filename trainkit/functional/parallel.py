"""Both cores for the passes over memory of convolutions and pools: a small persistent thread pool.

NumPy releases the GIL inside its copy and ufunc loops on large arrays, so two threads that each copy or add half
of an array run at once. ``split(work, n)`` runs ``work(part)`` for consecutive parts of ``range(n)`` (images,
channels), one per thread, and waits for all of them. Winograd's threads also run their own matrix products, so
they ask for a single-threaded BLAS meanwhile (threadpoolctl), and BLAS and our threads never oversubscribe the cores.

``TRAINKIT_CONV_THREADS=1`` turns the splitting off (everything runs on the calling thread).

>>> out = []
>>> _ = split(lambda part: out.append((part.start, part.stop)), 10)
>>> sorted(out) in ([(0, 10)], [(0, 5), (5, 10)])
True
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext

try:  # a dependency; should it be missing, BLAS thread counts cannot be set and work is simply not split
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - depends on the environment
    ThreadpoolController = None

__all__ = ["split", "THREADS", "MIN_BYTES"]


def _threads_from_environment() -> int:
    text = os.environ.get("TRAINKIT_CONV_THREADS", "") or "2"
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(
            f"TRAINKIT_CONV_THREADS={text!r} is not a thread count: give a whole number, 1 or more "
            "(1 keeps convolutions on the calling thread)"
        )
    return int(text)


THREADS = _threads_from_environment()

# Handing a part to another thread costs some tens of microseconds: only passes over at least this much memory
# are split.
MIN_BYTES = 1 << 20

_pool: ThreadPoolExecutor | None = None
_pool_size = [0]
_blas = None
_lock = threading.Lock()


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there, so a new pool is made when needed."""
    global _pool, _lock
    _pool, _lock = None, threading.Lock()
    _pool_size[0] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


@contextmanager
def _single_threaded_blas():
    """BLAS on one thread inside the block (each of our threads then runs its own products), as before after."""
    global _blas
    if _blas is None:
        _blas = ThreadpoolController().select(user_api="blas").lib_controllers
    before = [lib.num_threads for lib in _blas]
    for lib in _blas:
        lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, count in zip(_blas, before):
            lib.set_num_threads(count)


def split(work, n: int, single_blas: bool = False) -> list:
    """``work(part)`` for consecutive slices of ``range(n)``, one per thread (``THREADS``), and their results in
    order. ``single_blas``: the parts run matrix products of their own, so BLAS uses one thread meanwhile.

    One split at a time uses the pool: a split asked for meanwhile (another thread's, or one inside a part) runs
    on its caller's thread.
    """
    global _pool
    parts = min(THREADS, n)
    if parts < 2 or ThreadpoolController is None or not _lock.acquire(blocking=False):
        return [work(slice(0, n))]
    try:
        if _pool is None or _pool_size[0] < parts:  # created once, its threads kept for the process's life
            if _pool is not None:  # THREADS was raised: the smaller pool's threads end
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(parts, thread_name_prefix="trainkit-conv")
            _pool_size[0] = parts
        bounds = [n * i // parts for i in range(parts + 1)]
        with _single_threaded_blas() if single_blas else nullcontext():
            return list(_pool.map(work, [slice(a, b) for a, b in zip(bounds, bounds[1:])]))
    finally:
        _lock.release()
