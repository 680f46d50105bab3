"""Settings that belong to a whole process, for programs that own theirs (the ``trainkit`` command, benchmarks).

A library must not change them behind its importer's back, so nothing here runs on import.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program was, so that it unwinds as after Ctrl-C (saving, releasing locks).

    A subclass of KeyboardInterrupt because schedulers, containers and ``kill`` send SIGTERM to mean what a user
    means by Ctrl-C: stop now, keep what can be kept.
    """

    exit_code = 128 + signal.SIGTERM


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """The shell's code for a process ended by this interrupt: 130 after Ctrl-C (SIGINT), 143 after SIGTERM.

    >>> exit_code(KeyboardInterrupt()), exit_code(Terminated())
    (130, 143)
    """
    return getattr(interrupt, "exit_code", 128 + signal.SIGINT)


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated` (a KeyboardInterrupt) in the main thread.

    >>> with sigterm_as_interrupt():
    ...     pass
    """
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: signals stay as they are
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
