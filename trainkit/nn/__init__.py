"""``trainkit.nn``: PyTorch's name for ``trainkit.layers`` (modules, layers, losses)."""

from ..layers import *  # noqa: F403
from . import utils  # noqa: E402,F401
