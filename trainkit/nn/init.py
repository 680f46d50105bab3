"""``trainkit.nn.init``: in-place initialisers (see ``trainkit.layers.init``)."""

from ..layers.init import *  # noqa: F403
from ..layers.init import _calculate_fan_in_and_fan_out, calculate_gain  # noqa: F401
