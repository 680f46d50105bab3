"""``torch.random``: the CPU default stream's seed and state, and ``fork_rng``.

>>> import trainkit.random
>>> _ = trainkit.random.manual_seed(0)
>>> trainkit.random.initial_seed()
0
"""

from __future__ import annotations

from .autograd.random import Generator, fork_rng, get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["Generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state"]
