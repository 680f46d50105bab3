"""``trainkit.nn.modules.flatten`` (``torch.nn.modules.flatten``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.flatten import Flatten
>>> Flatten is trainkit.nn.Flatten
True
"""

from ...layers import Flatten, Unflatten

__all__ = ["Flatten", "Unflatten"]
