"""``trainkit.amp`` (``torch.amp``): automatic mixed precision, ``autocast`` and ``GradScaler``.

>>> import trainkit
>>> trainkit.amp.autocast is trainkit.autocast
True
"""

from .autocast_mode import (
    autocast,
    clear_autocast_cache,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .grad_scaler import GradScaler, OptState

__all__ = [
    "GradScaler",
    "OptState",
    "autocast",
    "clear_autocast_cache",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_cache_enabled",
    "is_autocast_enabled",
    "set_autocast_cache_enabled",
    "set_autocast_dtype",
    "set_autocast_enabled",
]
