"""``trainkit.nn.modules.normalization`` (``torch.nn.modules.normalization``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.normalization import GroupNorm
>>> GroupNorm is trainkit.nn.GroupNorm
True
"""

from ...layers import GroupNorm, LayerNorm

__all__ = ["GroupNorm", "LayerNorm"]
