"""Random number streams: one seeded generator per device, reset by ``manual_seed``."""

from __future__ import annotations

import numpy as np

from .backend import device, module_for


class Generator:
    """A seeded source of random numbers for one device, as ``torch.Generator``.

    >>> g = Generator().manual_seed(0)
    >>> g.initial_seed()
    0
    """

    def __init__(self, device_: str | device = "cpu"):
        self.device = device(device_)
        self._seed = 0
        self._rng = None
        self.manual_seed(np.random.SeedSequence().entropy % (2**63))

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        xp = module_for(self.device) if self.device.type == "cuda" else np
        self._rng = xp.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int:
        return self._seed

    @property
    def rng(self):
        return self._rng

    def get_state(self):
        return self._rng.bit_generator.state

    def set_state(self, state) -> None:
        self._rng.bit_generator.state = state


default_generator = Generator("cpu")
_cuda_generators: dict[int, Generator] = {}


def generator_for(dev: device, generator: Generator | None = None) -> Generator:
    """The generator to draw from for ``dev``: the one given, else that device's default stream."""
    if generator is not None:
        return generator
    if dev.type == "cpu":
        return default_generator
    index = dev.index or 0
    if index not in _cuda_generators:
        _cuda_generators[index] = Generator(device("cuda", index)).manual_seed(default_generator.initial_seed())
    return _cuda_generators[index]


def manual_seed(seed: int) -> Generator:
    """Seed every device's default stream so that runs repeat exactly.

    >>> import trainkit
    >>> _ = trainkit.manual_seed(0); a = trainkit.rand(2)
    >>> _ = trainkit.manual_seed(0); bool((trainkit.rand(2) == a).all())
    True
    """
    default_generator.manual_seed(seed)
    for g in _cuda_generators.values():
        g.manual_seed(seed)
    return default_generator


def seed() -> int:
    """Seed from fresh entropy; returns the seed used."""
    s = int(np.random.SeedSequence().entropy % (2**63))
    manual_seed(s)
    return s


def initial_seed() -> int:
    return default_generator.initial_seed()
