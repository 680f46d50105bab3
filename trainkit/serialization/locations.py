"""``map_location`` as ``torch.load`` takes it: where each loaded tensor goes, given the location its storage was
saved from (``'cpu'``, ``'cuda:0'``).

- ``None``: where it was saved from, as torch restores it: a ``'cuda:N'`` storage to that GPU when one answers,
  else (unlike torch, which refuses) to the CPU; every other location to the CPU;
- a string or a ``trainkit.device``: that device for every tensor;
- a dict of location strings: ``{'cuda:0': 'cpu'}`` remaps the locations it names, the others go as with ``None``;
- a callable ``f(storage, location)``: returns the storage moved (``storage.cpu()``, ``storage.cuda(1)``,
  ``storage.to(device)``), or ``None`` to place it as with ``None``.

>>> placement("cpu")("cuda:0")
device(type='cpu')
>>> placement({"cuda:0": "cpu"})("cuda:0")
device(type='cpu')
>>> placement(lambda storage, location: storage)("cpu")
device(type='cpu')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..autograd.backend import CPU, cuda_is_available, device

__all__ = ["MappedStorage", "placement", "saved_place"]


class MappedStorage:
    """What a ``map_location`` callable receives: one saved storage and the device it is bound for.

    >>> MappedStorage(np.zeros(3, "f4"), "cpu").cuda(1).device
    device(type='cuda', index=1)
    """

    def __init__(self, array: np.ndarray, location: str | device):
        self.array = array
        self.device = location if isinstance(location, device) else _device(location)

    def cpu(self) -> MappedStorage:
        return MappedStorage(self.array, CPU)

    def cuda(self, device: int | str | None = None, non_blocking: bool = False) -> MappedStorage:
        if device is None:
            return MappedStorage(self.array, "cuda:0")
        return MappedStorage(self.array, f"cuda:{device}" if isinstance(device, int) else device)

    def to(self, device: Any = None, *args: Any, **kwargs: Any) -> MappedStorage:
        return MappedStorage(self.array, device if device is not None else self.device)

    def size(self) -> int:
        return int(self.array.size)

    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def __len__(self) -> int:
        return int(self.array.size)


def _device(location: Any) -> device:
    if isinstance(location, device):
        return location
    if isinstance(location, int):
        return device(f"cuda:{location}")
    if not isinstance(location, str):
        raise TypeError(
            f"map_location maps to a device or a string such as 'cpu' or 'cuda:0', got {type(location).__name__}"
        )
    return device(location)


def saved_place(location: str) -> device:
    """Where a storage saved from ``location`` goes without ``map_location``.

    >>> saved_place("cpu")
    device(type='cpu')
    """
    if isinstance(location, str) and location.startswith("cuda") and cuda_is_available():
        try:
            return device(location)
        except (TypeError, ValueError):
            return CPU
    return CPU


def placement(map_location: Any) -> Callable[..., device]:
    """A function from (saved location[, the storage's array]) to the device a tensor goes to.

    >>> placement(None)("cpu")
    device(type='cpu')
    >>> placement(3.5)
    Traceback (most recent call last):
    ...
    TypeError: map_location must be a device, a string such as 'cpu' or 'cuda:0', a dict of locations or a ...
    """
    if map_location is None:
        return lambda location, array=None: saved_place(location)
    if isinstance(map_location, (str, device)):
        target = _device(map_location)
        return lambda location, array=None: target
    if isinstance(map_location, dict):
        mapping = {k: _device(v) for k, v in map_location.items()}

        def mapped(location: str, array: np.ndarray | None = None) -> device:
            target = mapping.get(location)
            return target if target is not None else saved_place(location)

        return mapped
    if callable(map_location):

        def called(location: str, array: np.ndarray | None = None) -> device:
            result = map_location(MappedStorage(np.empty(0) if array is None else array, CPU), location)
            if result is None:
                return saved_place(location)
            if not isinstance(result, MappedStorage):
                raise TypeError(
                    f"map_location returned a {type(result).__name__}; it returns the storage it was given, "
                    "moved (storage.cpu(), storage.cuda(i), storage.to(device)), or None"
                )
            return result.device

        return called
    raise TypeError(
        "map_location must be a device, a string such as 'cpu' or 'cuda:0', a dict of locations or a callable "
        f"(storage, location), got {type(map_location).__name__}"
    )
