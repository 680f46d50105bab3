"""Files written whole: the contents go to a temporary name beside the file, then ``os.replace`` puts them in place,
so a reader sees the old file or the new one, never half of one.

>>> temporary_beside("runs/x/latest").name.startswith("latest.")
True
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

# Limits for reading archives someone else wrote, checked against what a member's zip header declares before
# anything is inflated or allocated. Both writers (trainkit.save, torch.save) store arrays uncompressed, so a member
# that inflates far more than that is no saved state, and a structure document (JSON or pickle) of a state dict is a
# few MB at most.
MAX_EXPANSION = 100
MAX_STRUCTURE_BYTES = 64 << 20


class FileFormatError(ValueError):
    """A file ``load`` cannot read: the message names the file and says what is wrong with it."""


def temporary_beside(path: str | os.PathLike) -> Path:
    """A name in ``path``'s folder that no other process or thread writing ``path`` uses (``*.tmp``, which
    ``run_lock`` clears after a killed writer): two writers of one file then never take each other's temporary away.

    >>> temporary_beside("/tmp/a.pt").suffix
    '.tmp'
    """
    path = Path(path)
    return path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
