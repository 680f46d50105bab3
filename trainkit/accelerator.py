"""``torch.accelerator``: the device-agnostic view of the machine's accelerator. trainkit's one accelerator is a
CUDA GPU through CuPy; without one (the CPU), ``current_accelerator()`` is None and ``is_available()`` False, as
in torch.

>>> import trainkit
>>> trainkit.accelerator.is_available() == trainkit.cuda.is_available()
True
"""

from __future__ import annotations

from . import cuda
from .autograd.backend import device

__all__ = [
    "current_accelerator",
    "current_device_index",
    "device_count",
    "is_available",
    "set_device_index",
    "synchronize",
]


def is_available() -> bool:
    """True when an accelerator (a CUDA GPU that CuPy reaches) is there.

    >>> isinstance(is_available(), bool)
    True
    """
    return bool(cuda.is_available())


def current_accelerator(check_available: bool = False) -> device | None:
    """``device('cuda')`` when a GPU is there, else None (``check_available`` is accepted: trainkit only reports
    an accelerator it can use).

    >>> current_accelerator() is None or current_accelerator().type == "cuda"
    True
    """
    return device("cuda") if is_available() else None


def device_count() -> int:
    """The number of accelerators (0 on the CPU).

    >>> device_count() >= 0
    True
    """
    return cuda.device_count() if is_available() else 0


def current_device_index() -> int:
    """The index of the current accelerator: 0 (trainkit uses the first GPU), -1 without one.

    >>> current_device_index() in (-1, 0)
    True
    """
    return 0 if is_available() else -1


def set_device_index(device_index) -> None:
    """Selects the accelerator; trainkit has one, so only index 0 (or -1, ignored) is accepted.

    >>> set_device_index(-1)
    """
    index = device_index.index if isinstance(device_index, device) else device_index
    if index in (None, -1):
        return
    if index != 0 or not is_available():
        raise RuntimeError(f"Invalid device index {index}: trainkit has {device_count()} accelerator(s)")


def synchronize(device_index=None) -> None:
    """Waits for the accelerator's queued work (nothing to wait for on the CPU).

    >>> synchronize()
    """
    if is_available():
        cuda.synchronize()
