"""One writer per run folder: a lock file that a second ``trainkit train`` on the same folder finds at once.

Two processes writing one run folder interleave its history and overwrite each other's checkpoints. The lock is a
file created with ``O_EXCL`` (atomic on a local file system) holding the owner's host and process id; a lock whose
process is gone (on this host) is stale and taken over, so a killed run never blocks its own resume.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from ..training.run_folder import RunFolder

LOCK_NAME = RunFolder.LOCK  # the name older code imports from here


class RunFolderBusy(RuntimeError):
    """Another live process holds the run folder."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process, but alive
        return True
    return True


class RunLock:
    """The lock of ``folder``; ``acquire`` raises ``RunFolderBusy`` naming the holder, ``release`` frees it.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> lock = RunLock(folder).acquire()
    >>> try:
    ...     RunLock(folder).acquire()
    ... except RunFolderBusy as err:
    ...     print(str(err).split(" (")[0])  # doctest: +ELLIPSIS
    run folder ... is in use by process ...
    >>> lock.release(); RunFolder(folder).lock.exists()
    False
    """

    def __init__(self, folder: str | Path):
        self.path = RunFolder(folder).lock
        self.held = False

    def acquire(self) -> RunLock:
        mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid()})
        for _ in range(2):  # a second try after removing a stale lock
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is not None and not self._stale(holder):
                    raise RunFolderBusy(
                        f"run folder {self.path.parent} is in use by process {holder.get('pid')} on "
                        f"{holder.get('host')} (its lock {self.path}); wait for that run to end, or remove the lock "
                        "if that process is gone"
                    ) from None
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(mine)
            self.held = True
            return self
        raise RunFolderBusy(f"run folder {self.path.parent}: could not take its lock {self.path}")

    def _holder(self) -> dict | None:
        try:
            holder = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None  # unreadable or half written: treated as stale
        return holder if isinstance(holder, dict) else None

    @staticmethod
    def _stale(holder: dict) -> bool:
        pid = holder.get("pid")
        same_host = holder.get("host") == socket.gethostname()
        return same_host and isinstance(pid, int) and not _alive(pid)

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Delete the ``*.tmp`` files a killed writer left in ``folder/checkpoints`` (only the lock holder calls this,
    so no live writer owns them); returns what it removed."""
    removed = []
    for tmp in RunFolder(folder).temporaries():
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed
