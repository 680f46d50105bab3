"""``trainkit.nn.modules.linear`` (``torch.nn.modules.linear``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.linear import Identity
>>> Identity is trainkit.nn.Identity
True
"""

from ...layers import Identity, Linear
from ...layers.attention import NonDynamicallyQuantizableLinear

__all__ = ["Identity", "Linear", "NonDynamicallyQuantizableLinear"]
