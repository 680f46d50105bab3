"""``trainkit.nn.functional``: the functional forms of layers and losses (``trainkit.functional``)."""

from ..functional import *  # noqa: F403
from ..functional import __all__  # noqa: F401
