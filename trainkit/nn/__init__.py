"""``trainkit.nn``: PyTorch's name for ``trainkit.layers`` (modules, layers, losses), with ``functional``,
``init`` and ``utils``, and PyTorch's module paths ``modules`` (``torch.nn.modules.rnn.LSTM``) and
``parameter``."""

from ..layers import *  # noqa: F403
from . import functional, init, modules, parallel, parameter, utils  # noqa: F401
