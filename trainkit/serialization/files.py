"""Files written whole: the contents go to a temporary name beside the file, then ``os.replace`` puts them in place,
so a reader sees the old file or the new one, never half of one.

>>> temporary_beside("runs/x/latest").name.startswith("latest.")
True
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Limits for reading archives someone else wrote, checked against what a member's zip header declares before
# anything is inflated or allocated. Both writers (trainkit.save, torch.save) store arrays uncompressed, so a member
# that inflates far more than that is no saved state, and a structure document (JSON or pickle) of a state dict is a
# few MB at most.
MAX_EXPANSION = 100
MAX_STRUCTURE_BYTES = 64 << 20


class FileFormatError(ValueError):
    """A file ``load`` cannot read: the message names the file and says what is wrong with it."""


def creation_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the process's umask (read from ``/proc/self/status`` where
    the system shows it, since setting the umask to read it back races with other threads' new files).

    >>> 0 <= creation_mode() <= 0o666
    True
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def temporary_beside(path: str | os.PathLike) -> Path:
    """A name in ``path``'s folder that no other process or thread writing ``path`` uses (``*.tmp``, which
    ``run_lock`` clears after a killed writer): two writers of one file then never take each other's temporary away.

    >>> temporary_beside("/tmp/a.pt").suffix
    '.tmp'
    """
    path = Path(path)
    return path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")


@contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """OSErrors raised inside name ``path`` when they name no file: a write or close that fails (a full disk, a
    quota, a lost network share) raises ``[Errno 28] No space left on device`` without saying where.

    >>> with naming("/tmp/x.npz"):
    ...     raise OSError(28, "No space left on device")
    Traceback (most recent call last):
    ...
    OSError: [Errno 28] No space left on device: '/tmp/x.npz'
    """
    try:
        yield
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        raise OSError(err.errno, err.strerror, os.fspath(path)) from err
