"""``trainkit.nn.utils.rnn``: packed and padded sequences (see ``trainkit.layers.rnn_utils``)."""

from ...layers.rnn_utils import *  # noqa: F403
from ...layers.rnn_utils import __all__  # noqa: F401
