"""Settings that belong to a whole process, for programs that own theirs (the ``trainkit`` command, benchmarks).

A library must not change them behind its importer's back, so nothing here runs on import.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory(threshold: int = 1 << 30) -> bool:
    """Ask glibc's allocator to keep freed blocks below ``threshold`` bytes for reuse instead of returning them.

    By default glibc gives large blocks back to the OS on every free, so each training step pays page faults on
    every fresh activation and gradient array; keeping them made a small CNN step about twice as fast here
    (``benchmarks/cnn_step.py``). The cost is a process that holds on to its peak memory. Returns False where
    there is no glibc (macOS, Windows, musl), and changes nothing there.

    >>> isinstance(keep_freed_memory(), bool)
    True
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, threshold))
