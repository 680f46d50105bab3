"""``trainkit.nn``: PyTorch's name for ``trainkit.layers`` (modules, layers, losses)."""

from ..layers import *  # noqa: F403
