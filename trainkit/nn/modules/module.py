"""``trainkit.nn.modules.module`` (``torch.nn.modules.module``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.module import Module
>>> Module is trainkit.nn.Module
True
"""

from ...layers import Module

__all__ = ["Module"]
