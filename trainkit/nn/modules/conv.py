"""``trainkit.nn.modules.conv`` (``torch.nn.modules.conv``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.conv import Conv1d
>>> Conv1d is trainkit.nn.Conv1d
True
"""

from ...layers import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]
