"""One writer per run folder: a lock file that a second ``trainkit train`` on the same folder finds at once.

Two processes writing one run folder interleave its history and overwrite each other's checkpoints. Where the
system has ``flock`` (Linux, macOS), the lock is the kernel's lock on the file ``.lock``: taking it is atomic, and
the kernel lets go of it when its process ends in any way (an exception, Ctrl-C, SIGTERM, an MPI abort, SIGKILL), so
a lock is never stale and a killed run never blocks its own resume. The file holds the owner's host and process id
for the message a second writer gets; the owner removes it on release, and whoever locked a file that was removed
meanwhile tries again on the new one. Elsewhere the lock is a file created with ``O_EXCL``, taken over when the
process it names is gone.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: the O_EXCL file alone guards the folder
    fcntl = None

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
        self.fd: int | None = None

    def acquire(self) -> RunLock:
        mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid()})
        if fcntl is not None:
            return self._acquire_flock(mine)
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

    def _acquire_flock(self, mine: str) -> RunLock:
        for _ in range(100):  # each retry follows a holder that released (and removed) the file meanwhile
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise self._busy(self._holder()) from None
            if self._still_at_path(fd):
                os.ftruncate(fd, 0)
                os.write(fd, mine.encode())
                self.fd, self.held = fd, True
                return self
            os.close(fd)  # locked a file its holder had removed on release: lock the one there now
        raise RunFolderBusy(f"run folder {self.path.parent}: could not take its lock {self.path}")

    def _still_at_path(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def _busy(self, holder: dict | None) -> RunFolderBusy:
        who = f"process {holder.get('pid')} on {holder.get('host')}" if holder else "another process"
        return RunFolderBusy(
            f"run folder {self.path.parent} is in use by {who} (its lock {self.path}); wait for that run to end"
        )

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
            self.path.unlink(missing_ok=True)  # while still locked: the next writer locks a new file
            if self.fd is not None:
                os.close(self.fd)  # closing the last descriptor lets go of the kernel's lock
                self.fd = None
            self.held = False


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Delete the ``*.tmp`` files a killed writer left in ``folder/checkpoints`` (only the lock holder calls this,
    so no live writer owns them); returns what it removed."""
    removed = []
    for tmp in RunFolder(folder).temporaries():
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed
