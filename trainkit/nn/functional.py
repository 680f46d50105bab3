"""``trainkit.nn.functional``: the functional forms of layers and losses (see ``trainkit.layers.functional``)."""

from ..layers.functional import *  # noqa: F403
from ..layers.functional import __all__  # noqa: F401
