"""``trainkit.nn``: PyTorch's name for ``trainkit.layers`` (modules, layers, losses), with ``functional``,
``init`` and ``utils``."""

from ..layers import *  # noqa: F403
from . import functional, init, parallel, utils  # noqa: F401
