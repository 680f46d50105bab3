"""``trainkit.utils.data``: PyTorch's name for ``trainkit.data``."""

from ..data import *  # noqa: F403
from ..data import __all__  # noqa: F401
