"""``torch.multiprocessing``: Python's ``multiprocessing`` under PyTorch's name, with ``spawn``, which starts
``nprocs`` processes running ``fn(i, *args)`` and raises in the parent when one of them fails.

Tensors cross process boundaries by pickling (their data is copied); there is no shared-memory tensor storage, so
``set_sharing_strategy`` only records its argument.

>>> import trainkit.multiprocessing as mp
>>> mp.get_context("spawn").Process is not None and callable(mp.spawn)
True
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Callable
from multiprocessing import *  # noqa: F403  (every name of Python's multiprocessing, as torch re-exports them)

__all__ = list(multiprocessing.__all__) + [
    "ProcessContext",
    "ProcessExitedException",
    "ProcessRaisedException",
    "get_all_sharing_strategies",
    "get_sharing_strategy",
    "set_sharing_strategy",
    "spawn",
    "start_processes",
]

SHARING_STRATEGIES = {"file_descriptor", "file_system"}


class SharingStrategy:
    """The strategy ``set_sharing_strategy`` last set."""

    current = "file_descriptor"


def set_sharing_strategy(new_strategy: str) -> None:
    """Records how tensors would be shared between processes (``"file_descriptor"`` or ``"file_system"``).

    >>> set_sharing_strategy("file_system"); get_sharing_strategy()
    'file_system'
    >>> set_sharing_strategy("file_descriptor")
    """
    if new_strategy not in SHARING_STRATEGIES:
        raise AssertionError(f"unknown sharing strategy: {new_strategy}")
    SharingStrategy.current = new_strategy


def get_sharing_strategy() -> str:
    """The sharing strategy last set (``"file_descriptor"`` by default).

    >>> get_sharing_strategy()
    'file_descriptor'
    """
    return SharingStrategy.current


def get_all_sharing_strategies() -> set[str]:
    """The sharing strategies there are.

    >>> sorted(get_all_sharing_strategies())
    ['file_descriptor', 'file_system']
    """
    return set(SHARING_STRATEGIES)


class ProcessException(Exception):
    """A process started by ``spawn`` failed."""

    def __init__(self, msg: str, error_index: int, pid: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid


class ProcessRaisedException(ProcessException):
    """A spawned process raised: the message holds its traceback.

    >>> str(ProcessRaisedException("boom", 0, 1))
    'boom'
    """


class ProcessExitedException(ProcessException):
    """A spawned process exited with a non-zero code or was killed by a signal.

    >>> ProcessExitedException("gone", 1, 2, exit_code=3).exit_code
    3
    """

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name


def wrap(fn: Callable, i: int, args: tuple, error_queue) -> None:
    """What each spawned process runs: ``fn(i, *args)``; an exception's traceback goes to the parent."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is being interrupted too
    except Exception:  # noqa: BLE001  (any failure of the user's function is reported to the parent)
        error_queue.put(traceback.format_exc())
        raise SystemExit(1) from None


class ProcessContext:
    """The processes ``spawn(..., join=False)`` started; ``join()`` waits for them and raises if one failed.

    >>> ProcessContext([], []).join()
    True
    """

    def __init__(self, processes: list, error_queues: list) -> None:
        self.processes = processes
        self.error_queues = error_queues

    def pids(self) -> list[int]:
        """The process ids."""
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Waits (up to ``timeout`` seconds each) for the processes; True once all ended well. The first failure
        terminates the others and raises ``ProcessRaisedException`` (its traceback) or ``ProcessExitedException``.
        """
        for p in self.processes:
            p.join(timeout)
        for i, p in enumerate(self.processes):
            if p.exitcode is None or p.exitcode == 0:
                continue
            for other in self.processes:
                if other.is_alive():
                    other.terminate()
                    other.join()
            if not self.error_queues[i].empty():
                message = f"\n\n-- Process {i} terminated with the following error:\n" + self.error_queues[i].get()
                raise ProcessRaisedException(message, i, p.pid)
            if p.exitcode < 0:
                name = signal.Signals(-p.exitcode).name
                raise ProcessExitedException(
                    f"process {i} terminated with signal {name}", i, p.pid, p.exitcode, signal_name=name
                )
            raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}", i, p.pid, p.exitcode)
        return all(p.exitcode is not None for p in self.processes)


def start_processes(
    fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False, start_method="spawn"
) -> ProcessContext | None:
    """``spawn`` with any start method (``"spawn"``, ``"fork"``, ``"forkserver"``).

    >>> start_processes(print, nprocs=0)
    """
    context = multiprocessing.get_context(start_method)
    processes, error_queues = [], []
    for i in range(nprocs):
        error_queue = context.SimpleQueue()
        process = context.Process(target=wrap, args=(fn, i, args, error_queue), daemon=daemon)
        process.start()
        processes.append(process)
        error_queues.append(error_queue)
    done = ProcessContext(processes, error_queues)
    if not join:
        return done
    done.join()
    return None


def spawn(
    fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False, start_method="spawn"
) -> ProcessContext | None:
    """Runs ``fn(i, *args)`` for ``i`` in ``range(nprocs)``, each in a new process (``start_method``); with
    ``join`` waits for all and raises ``ProcessRaisedException`` (with the child's traceback) if one raised, else
    returns the ``ProcessContext`` to join later. ``fn`` must be importable by the new processes (defined at a
    module's top level).

    >>> spawn(print, nprocs=0)
    """
    return start_processes(fn, args, nprocs, join, daemon, start_method)
